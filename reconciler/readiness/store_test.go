package readiness

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/types"

	"github.com/peppy-ratio/lbregistrar/reconciler/desired"
	"github.com/peppy-ratio/lbregistrar/reconciler/oci"
	"github.com/peppy-ratio/lbregistrar/reconciler/plan"
)

// A reconcile that did not read health (another was parked behind it)
// keeps the states last read of the backends still served, and when they
// were read; a backend added since has none until the next read, not a
// borrowed OK.
func TestStoreKeepsHealthAcrossAnUnreadPass(t *testing.T) {
	var s Store
	a, b := plan.Backend{IP: "10.1.0.1", Port: 80}, plan.Backend{IP: "10.1.0.2", Port: 80}
	t0 := time.Unix(1000, 0)
	put := func(backends []plan.Backend, health *oci.BackendSetHealth, readAt time.Time, stands desired.Stands) Set {
		s.Put("web", Record{Sets: map[string]*Set{"pods": NewSet(backends, health, readAt, oci.HealthSchedule{}, stands, "")}}, readAt)
		got, _ := s.Get("web")
		return *got.Sets["pods"]
	}
	put([]plan.Backend{a}, &oci.BackendSetHealth{Status: "OK"}, t0, nil)
	got := put([]plan.Backend{a, b}, nil, t0.Add(time.Second), nil)
	if diff := cmp.Diff(map[string]string{"10.1.0.1:80": "OK"}, got.Health); diff != "" || !got.ReadAt.Equal(t0) {
		t.Errorf("after an unread pass, read at %v (-want +got):\n%s", got.ReadAt, diff)
	}
	drained := b
	drained.Drain = true
	got = put([]plan.Backend{a, drained}, &oci.BackendSetHealth{Status: "CRITICAL", Critical: []string{"10.1.0.1:80"}}, t0.Add(2*time.Second), nil)
	if diff := cmp.Diff(map[string]bool{"10.1.0.1:80": true}, got.Serving); diff != "" {
		t.Errorf("serving (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(map[string]string{"10.1.0.1:80": "CRITICAL"}, got.Health); diff != "" {
		t.Errorf("after a read (-want +got):\n%s", diff)
	}
	// An overall UNKNOWN or CRITICAL that lists no backend (no probes sent
	// yet) is not OK for anyone.
	for _, status := range []string{"UNKNOWN", "CRITICAL"} {
		if got := put([]plan.Backend{a}, &oci.BackendSetHealth{Status: status}, t0.Add(3*time.Second), nil); got.Health["10.1.0.1:80"] != status {
			t.Errorf("overall %s, nothing listed: %v", status, got.Health)
		}
	}
	s.Forget("web")
	if _, ok := s.Get("web"); ok {
		t.Error("a forgotten resource is still known")
	}
}

// A pod standing for a backend the set had already (a pod at a gone pod's
// address, or a drained backend called back) is Reused, stamped when it
// first stood; one whose backend is added for it is not; after a restart
// nothing is known, and every pod is taken as Reused. A pod behind its
// node (a node target) is never Reused: the node's health is kube-proxy's
// answer, the same before the pod as after it until it is Ready.
func TestStoreStampsPodsAtAnOldAddress(t *testing.T) {
	var s Store
	a, b := plan.Backend{IP: "10.1.0.1", Port: 80}, plan.Backend{IP: "10.1.0.2", Port: 80, Drain: true}
	t0 := time.Unix(1000, 0)
	stand := func(uid types.UID, backend string) desired.Stands {
		return desired.Stands{uid: {{Backends: []string{backend}, Healthy: true}}}
	}
	put := func(stands desired.Stands, at time.Time, backends ...plan.Backend) Set {
		s.Put("web", Record{Sets: map[string]*Set{"pods": NewSet(backends, nil, at, oci.HealthSchedule{}, stands, "")}}, at)
		got, _ := s.Get("web")
		return *got.Sets["pods"]
	}
	behindNode := func(uid types.UID, backend string) desired.Stands {
		return desired.Stands{uid: {{Backends: []string{backend}, Healthy: true, Node: true}}}
	}
	first := stand("first", "10.1.0.1:80")
	first["first-behind-node"] = behindNode("first-behind-node", "10.1.0.2:80")["first-behind-node"]
	if got := put(first, t0, a, b); !got.Reused["first"] || got.Reused["first-behind-node"] {
		t.Errorf("after a restart a pod is not taken as Reused, or one behind its node is: %+v", got.Reused)
	}
	put(nil, t0.Add(time.Second), a, b)
	merged := stand("new", "10.1.0.3:80")
	merged["old-address"] = stand("old-address", "10.1.0.1:80")["old-address"]
	merged["called-back"] = stand("called-back", "10.1.0.2:80")["called-back"]
	merged["behind-node"] = behindNode("behind-node", "10.1.0.1:80")["behind-node"]
	got := put(merged, t0.Add(2*time.Second), a, b, plan.Backend{IP: "10.1.0.3", Port: 80})
	want := map[types.UID]bool{"new": false, "old-address": true, "called-back": true, "behind-node": false}
	if diff := cmp.Diff(want, got.Reused); diff != "" {
		t.Errorf("reused (-want +got):\n%s", diff)
	}
	got = put(merged, t0.Add(3*time.Second), a, b, plan.Backend{IP: "10.1.0.3", Port: 80})
	if !got.Since["old-address"].Equal(t0.Add(2*time.Second)) || !got.Reused["old-address"] {
		t.Errorf("a pod standing still is stamped again: since %v, reused %t", got.Since["old-address"], got.Reused["old-address"])
	}
}
