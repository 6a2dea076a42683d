// Package readiness decides lbregistrar's readiness gate of one pod
// (v1beta1.ReadinessGate), as a pure function of what the pod is expected
// to be registered as and what the controller last saw of the backend sets.
package readiness

import (
	"fmt"
	"strings"
)

// Expectation is one backend set that registers a pod: the backends that
// stand for it there (its addresses, or its node's, with the port; the set
// holds the one of its IP version; none while the pod is not in the
// Service's EndpointSlices yet) and whether OCI must report that backend
// OK, or its being registered and serving suffices.
type Expectation struct {
	LBRegistrar    string
	LoadBalancerID string
	BackendSet     string
	Backends       []string // ip:port, as plan.Key forms them
	Healthy        bool
}

// Seen is what the controller last saw of a backend set: the backends it
// holds serving (neither drained nor offline), and the state OCI last
// reported of each (OK, WARNING, CRITICAL, UNKNOWN; none before its
// health was read since it was added).
type Seen struct {
	Serving map[string]bool
	Health  map[string]string
}

// Decide is the gate's status: true once every expectation is met, else
// false with a message naming the first that is not. A pod expected
// nowhere is ready: no LBRegistrar registers it.
func Decide(expected []Expectation, seen func(loadBalancerID, backendSet string) (Seen, bool)) (bool, string) {
	if len(expected) == 0 {
		return true, "no LBRegistrar registers this pod"
	}
	var names []string
	for _, e := range expected {
		where := fmt.Sprintf("backend set %q of %s (LBRegistrar %s)", e.BackendSet, e.LoadBalancerID, e.LBRegistrar)
		s, ok := seen(e.LoadBalancerID, e.BackendSet)
		if !ok {
			return false, where + " has not been written since the pod's endpoint appeared"
		}
		if len(e.Backends) == 0 {
			return false, fmt.Sprintf("the pod is not in the EndpointSlices of the Service %s registers in %s yet", e.LBRegistrar, where)
		}
		backend := ""
		for _, b := range e.Backends {
			if s.Serving[b] {
				backend = b
				break
			}
		}
		switch {
		case backend == "":
			return false, fmt.Sprintf("%s does not hold %s serving yet", where, strings.Join(e.Backends, " or "))
		case !e.Healthy:
		case s.Health[backend] == "":
			return false, fmt.Sprintf("%s holds %s; its health has not been read yet", where, backend)
		case s.Health[backend] != "OK":
			return false, fmt.Sprintf("%s holds %s; OCI reports it %s", where, backend, s.Health[backend])
		}
		names = append(names, backend+" in "+e.BackendSet)
	}
	return true, "the load balancer has it: " + strings.Join(names, ", ")
}
