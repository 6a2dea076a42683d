package readiness

import (
	"strings"
	"testing"
)

func TestDecide(t *testing.T) {
	pod := Expectation{LBRegistrar: "web", LoadBalancerID: "lb", BackendSet: "pods", Backends: []string{"10.1.0.7:8080", "[fd00::7]:8080"}, Healthy: true}
	node := Expectation{LBRegistrar: "web", LoadBalancerID: "lb", BackendSet: "nodes", Backends: []string{"10.0.0.1:30080"}}
	seen := map[string]Seen{
		"pods-ok":        {Serving: map[string]bool{"10.1.0.7:8080": true, "10.1.0.8:8080": true}, Health: map[string]string{"10.1.0.7:8080": "OK", "10.1.0.8:8080": "CRITICAL"}},
		"pods-v6":        {Serving: map[string]bool{"[fd00::7]:8080": true}, Health: map[string]string{"[fd00::7]:8080": "OK"}},
		"pods-critical":  {Serving: map[string]bool{"10.1.0.7:8080": true}, Health: map[string]string{"10.1.0.7:8080": "CRITICAL"}},
		"pods-unread":    {Serving: map[string]bool{"10.1.0.7:8080": true}, Health: map[string]string{}},
		"pods-draining":  {Serving: map[string]bool{}, Health: map[string]string{}},
		"nodes-unhealth": {Serving: map[string]bool{"10.0.0.1:30080": true}, Health: map[string]string{"10.0.0.1:30080": "CRITICAL"}},
	}
	for _, tt := range []struct {
		name     string
		expected []Expectation
		seenAs   map[string]string // backend set -> key of seen
		ready    bool
		mentions string
	}{
		{"expected nowhere", nil, nil, true, "no LBRegistrar"},
		{"its backend OK", []Expectation{pod}, map[string]string{"pods": "pods-ok"}, true, "10.1.0.7:8080 in pods"},
		{"its IPv6 backend in an IPv6 set", []Expectation{pod}, map[string]string{"pods": "pods-v6"}, true, "[fd00::7]:8080"},
		{"not written yet", []Expectation{pod}, nil, false, "has not been written"},
		{"not in the Service's EndpointSlices yet", []Expectation{{LBRegistrar: "web", LoadBalancerID: "lb", BackendSet: "pods", Healthy: true}}, map[string]string{"pods": "pods-ok"}, false, "not in the EndpointSlices"},
		{"not held serving", []Expectation{pod}, map[string]string{"pods": "pods-draining"}, false, "does not hold 10.1.0.7:8080 or [fd00::7]:8080 serving"},
		{"health unread", []Expectation{pod}, map[string]string{"pods": "pods-unread"}, false, "health has not been read"},
		{"OCI reports it CRITICAL", []Expectation{pod}, map[string]string{"pods": "pods-critical"}, false, "CRITICAL"},
		{"its node registered suffices, whatever its health", []Expectation{node}, map[string]string{"nodes": "nodes-unhealth"}, true, "10.0.0.1:30080 in nodes"},
		{"every set must have it", []Expectation{node, pod}, map[string]string{"nodes": "nodes-unhealth", "pods": "pods-critical"}, false, `backend set "pods"`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ready, msg := Decide(tt.expected, func(lb, set string) (Seen, bool) {
				key, ok := tt.seenAs[set]
				return seen[key], ok && lb == "lb"
			})
			if ready != tt.ready || !strings.Contains(msg, tt.mentions) {
				t.Errorf("Decide = %t, %q; want %t, mentioning %q", ready, msg, tt.ready, tt.mentions)
			}
		})
	}
}
