package readiness

import (
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/peppy-ratio/lbregistrar/api/v1beta1"
	"github.com/peppy-ratio/lbregistrar/reconciler/desired"
	"github.com/peppy-ratio/lbregistrar/reconciler/oci"
)

func TestDecide(t *testing.T) {
	const uid = types.UID("pod")
	podGate := desired.Gate{LBRegistrar: "web", Generation: 2, LoadBalancerID: "lb", BackendSet: "pods", Target: 0}
	nodeGate := desired.Gate{LBRegistrar: "web", Generation: 2, LoadBalancerID: "lb", BackendSet: "nodes", Target: 1}
	podStand := desired.Stands{uid: {{Target: 0, Backends: []string{"10.1.0.7:8080"}, Healthy: true}}}
	nodeStand := desired.Stands{uid: {{Target: 1, Backends: []string{"10.0.0.1:30080"}}}}
	set := func(stands desired.Stands, serving, health, blocked string) *Set {
		s := &Set{Serving: map[string]bool{}, Health: map[string]string{}, Stands: stands, Blocked: blocked}
		if serving != "" {
			s.Serving[serving] = true
		}
		if health != "" {
			s.Health[serving] = health
		}
		return s
	}
	// reused marks the pod as standing for a backend the set had before
	// it, its health read after; OCI's checks settle in one second.
	reused := func(s *Set, after time.Duration) *Set {
		t0 := time.Unix(1000, 0)
		s.Schedule, s.ReadAt = oci.HealthSchedule{Interval: 300 * time.Millisecond, Timeout: 400 * time.Millisecond, Retries: 1}, t0.Add(after)
		s.Since, s.Reused = map[types.UID]time.Time{uid: t0}, map[types.UID]bool{uid: true}
		return s
	}
	record := func(sets map[string]*Set) map[string]Record {
		return map[string]Record{"web": {Generation: 2, Sets: sets}}
	}
	for _, tt := range []struct {
		name    string
		gates   []desired.Gate
		records map[string]Record
		health  bool
		reason  string
		wait    string
		mention string
	}{
		{"gated nowhere", nil, nil, true, v1beta1.ReasonNotRegistered, "", "no LBRegistrar"},
		{"its backend OK", []desired.Gate{podGate}, record(map[string]*Set{"pods": set(podStand, "10.1.0.7:8080", "OK", "")}), true, v1beta1.ReasonLoadBalancerReady, "", "10.1.0.7:8080 in pods"},
		{"not reconciled yet", []desired.Gate{podGate}, nil, true, v1beta1.ReasonLoadBalancerPending, WaitRegistering, "not been reconciled"},
		{"reconciled at an older generation", []desired.Gate{podGate}, map[string]Record{"web": {Generation: 1}}, true, v1beta1.ReasonLoadBalancerPending, WaitRegistering, "generation 2"},
		{"not written yet", []desired.Gate{podGate}, record(nil), true, v1beta1.ReasonLoadBalancerPending, WaitRegistering, "has not been written"},
		{"not in the slices yet", []desired.Gate{podGate}, record(map[string]*Set{"pods": set(nil, "10.1.0.9:8080", "OK", "")}), true, v1beta1.ReasonLoadBalancerPending, WaitRegistering, "not in the EndpointSlices"},
		{"not there serving", []desired.Gate{podGate}, record(map[string]*Set{"pods": set(podStand, "", "", "")}), true, v1beta1.ReasonLoadBalancerPending, WaitRegistering, "does not have 10.1.0.7:8080 serving"},
		{"health unread", []desired.Gate{podGate}, record(map[string]*Set{"pods": set(podStand, "10.1.0.7:8080", "", "")}), true, v1beta1.ReasonLoadBalancerPending, WaitHealth, "not been read"},
		{"OCI reports it CRITICAL", []desired.Gate{podGate}, record(map[string]*Set{"pods": set(podStand, "10.1.0.7:8080", "CRITICAL", "")}), true, v1beta1.ReasonLoadBalancerPending, WaitHealth, "CRITICAL"},
		{"no health reads: registration suffices", []desired.Gate{podGate}, record(map[string]*Set{"pods": set(podStand, "10.1.0.7:8080", "", "")}), false, v1beta1.ReasonLoadBalancerReady, "", "10.1.0.7:8080"},
		{"its node registered suffices where health waits for it", []desired.Gate{nodeGate}, record(map[string]*Set{"nodes": set(nodeStand, "10.0.0.1:30080", "CRITICAL", "")}), true, v1beta1.ReasonLoadBalancerReady, "", "10.0.0.1:30080 in nodes"},
		{"every set must have it", []desired.Gate{nodeGate, podGate}, record(map[string]*Set{"nodes": set(nodeStand, "10.0.0.1:30080", "", ""), "pods": set(podStand, "10.1.0.7:8080", "CRITICAL", "")}), true, v1beta1.ReasonLoadBalancerPending, WaitHealth, `backend set "pods"`},
		{"skipped: not waited for", []desired.Gate{podGate}, record(map[string]*Set{"pods": set(desired.Stands{uid: {{Skip: "its node b is not selected by spec.nodeSelector"}}}, "", "", "held")}), true, v1beta1.ReasonNotRegistered, "", "not selected"},
		{"skipped in one, met in another", []desired.Gate{nodeGate, podGate}, record(map[string]*Set{"nodes": set(desired.Stands{uid: {{Target: 1, Skip: "its node is leaving"}}}, "", "", ""), "pods": set(podStand, "10.1.0.7:8080", "OK", "")}), true, v1beta1.ReasonLoadBalancerReady, "", "not waited for"},
		{"the identity cannot be used", []desired.Gate{podGate}, map[string]Record{"web": {Generation: 2, Blocked: "SecretNotFound: no key"}}, true, v1beta1.ReasonLoadBalancerBlocked, WaitBlocked, "LBRegistrar web cannot write"},
		{"the set is held", []desired.Gate{podGate}, record(map[string]*Set{"pods": set(nil, "", "", "its desired state is held: no port")}), true, v1beta1.ReasonLoadBalancerBlocked, WaitBlocked, "no port"},
		{"OCI refused its addition", []desired.Gate{podGate}, record(map[string]*Set{"pods": set(podStand, "", "", "OCI refused adding 1 backends")}), true, v1beta1.ReasonLoadBalancerBlocked, WaitBlocked, "OCI refused"},
		{"a block does not matter once the set has it", []desired.Gate{podGate}, record(map[string]*Set{"pods": set(podStand, "10.1.0.7:8080", "OK", "OCI refused adding 1 backends")}), true, v1beta1.ReasonLoadBalancerReady, "", "10.1.0.7:8080"},
		{"suspended", []desired.Gate{{LBRegistrar: "web", Suspended: true}}, nil, true, v1beta1.ReasonLoadBalancerBlocked, WaitBlocked, "suspended"},
		{"released", []desired.Gate{{LBRegistrar: "web", Released: true, Suspended: true}}, nil, true, v1beta1.ReasonGatesReleased, "", v1beta1.ReleaseGatesAnnotation},
		{"at a gone pod's address, OK read too soon", []desired.Gate{podGate}, record(map[string]*Set{"pods": reused(set(podStand, "10.1.0.7:8080", "OK", ""), 500*time.Millisecond)}), true, v1beta1.ReasonLoadBalancerPending, WaitHealth, "stood for another pod"},
		{"at a gone pod's address, OK read once settled", []desired.Gate{podGate}, record(map[string]*Set{"pods": reused(set(podStand, "10.1.0.7:8080", "OK", ""), 2*time.Second)}), true, v1beta1.ReasonLoadBalancerReady, "", "10.1.0.7:8080"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			v := Decide(tt.gates, uid, func(name string) (Record, bool) { r, ok := tt.records[name]; return r, ok }, tt.health)
			wantReady := tt.wait == ""
			if v.Ready != wantReady || v.Reason != tt.reason || v.Wait != tt.wait || !strings.Contains(v.Message, tt.mention) {
				t.Errorf("Decide = %+v; want ready %t, reason %s, wait %q, mentioning %q", v, wantReady, tt.reason, tt.wait, tt.mention)
			}
			if v.Reason == v1beta1.ReasonLoadBalancerBlocked && !strings.Contains(v.Message, v1beta1.ReleaseGatesAnnotation) {
				t.Errorf("a blocked gate does not say how to release it: %q", v.Message)
			}
		})
	}
}

// A verdict that cannot depend on the pod's registration is given even
// before its containers are ready: nothing gates it, or every gate is
// released (the documented uninstall relies on it).
func TestUnconditional(t *testing.T) {
	for _, tt := range []struct {
		gates []desired.Gate
		want  bool
	}{
		{nil, true},
		{[]desired.Gate{{Released: true}, {Released: true, Suspended: true}}, true},
		{[]desired.Gate{{Released: true}, {}}, false},
	} {
		if got := Unconditional(tt.gates); got != tt.want {
			t.Errorf("Unconditional(%+v) = %t, want %t", tt.gates, got, tt.want)
		}
	}
}

// A gate the controller cannot write for is blocked, and says so,
// whatever another gate waits for: a person must act on it.
func TestDecideBlockedOutranksWaiting(t *testing.T) {
	const uid = types.UID("pod")
	records := map[string]Record{
		"holder": {Generation: 1, Sets: map[string]*Set{"pods": {Stands: desired.Stands{uid: {{Backends: []string{"10.1.0.7:8080"}, Healthy: true}}},
			Serving: map[string]bool{"10.1.0.7:8080": true}, Health: map[string]string{"10.1.0.7:8080": "CRITICAL"}}}},
		"late": {Generation: 1, Sets: map[string]*Set{"pods": {Blocked: "LBRegistrar holder keeps this backend set (Conflict)"}}},
	}
	gates := []desired.Gate{{LBRegistrar: "holder", Generation: 1, BackendSet: "pods"}, {LBRegistrar: "late", Generation: 1, BackendSet: "pods"}}
	v := Decide(gates, uid, func(name string) (Record, bool) { r, ok := records[name]; return r, ok }, true)
	if v.Wait != WaitBlocked || !strings.Contains(v.Message, "Conflict") {
		t.Errorf("Decide = %+v, want blocked by the Conflict", v)
	}
}

// A wait on OCI's health says when a read may find it changed: once the
// next check after the last read is over, the checks counted from when
// the pod first stood there (every 10 s here, each over within 3 s); for
// a pod at a gone pod's address, the end of the settle time.
func TestDecideSaysWhenToLookAgain(t *testing.T) {
	const uid = types.UID("pod")
	t0 := time.Unix(1000, 0)
	schedule := oci.HealthSchedule{Interval: 10 * time.Second, Timeout: 3 * time.Second, Retries: 3}
	set := func(health string, reused bool) *Set {
		return &Set{Stands: desired.Stands{uid: {{Backends: []string{"10.1.0.7:8080"}, Healthy: true}}}, Serving: map[string]bool{"10.1.0.7:8080": true},
			Health: map[string]string{"10.1.0.7:8080": health}, ReadAt: t0.Add(time.Second), Schedule: schedule,
			Since: map[types.UID]time.Time{uid: t0}, Reused: map[types.UID]bool{uid: reused}}
	}
	read := func(s *Set, at time.Duration) *Set { s.ReadAt = t0.Add(at); return s }
	gates := []desired.Gate{{LBRegistrar: "web", BackendSet: "pods"}}
	for _, tt := range []struct {
		name string
		set  *Set
		want time.Time
	}{
		{"UNKNOWN: once the first check is over", set("UNKNOWN", false), t0.Add(3 * time.Second)},
		{"CRITICAL: once the next check is over", read(set("CRITICAL", false), 3*time.Second), t0.Add(13 * time.Second)},
		{"CRITICAL, read late: once the check after the read is over", read(set("CRITICAL", false), 25*time.Second), t0.Add(33 * time.Second)},
		{"at a gone pod's address: once settled", set("OK", true), t0.Add(43 * time.Second)},
	} {
		v := Decide(gates, uid, func(string) (Record, bool) { return Record{Sets: map[string]*Set{"pods": tt.set}}, true }, true)
		if v.Wait != WaitHealth || !v.RecheckAt.Equal(tt.want) {
			t.Errorf("%s: %+v, want a health wait until %v", tt.name, v, tt.want)
		}
	}
}
