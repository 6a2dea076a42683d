package readiness

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/types"

	"github.com/peppy-ratio/lbregistrar/reconciler/desired"
	"github.com/peppy-ratio/lbregistrar/reconciler/oci"
	"github.com/peppy-ratio/lbregistrar/reconciler/plan"
)

// A reconcile that did not read health (another was parked behind it)
// keeps the states last read of the backends still served; a backend added
// since has none until the next read, not a borrowed OK; and neither has
// one that a new pod stands for now (a pod at an old pod's address).
func TestStoreKeepsHealthAcrossAnUnreadPass(t *testing.T) {
	var s Store
	a, b := plan.Backend{IP: "10.1.0.1", Port: 80}, plan.Backend{IP: "10.1.0.2", Port: 80}
	stand := func(uid types.UID, backend string) desired.Stands {
		return desired.Stands{uid: {{Backends: []string{backend}, Healthy: true}}}
	}
	put := func(backends []plan.Backend, health *oci.BackendSetHealth, stands desired.Stands) Set {
		s.Put("web", Record{Sets: map[string]*Set{"pods": NewSet(backends, health, stands, "")}})
		got, _ := s.Get("web")
		return *got.Sets["pods"]
	}
	put([]plan.Backend{a}, &oci.BackendSetHealth{Status: "OK"}, stand("old", "10.1.0.1:80"))
	got := put([]plan.Backend{a, b}, nil, stand("old", "10.1.0.1:80"))
	if diff := cmp.Diff(map[string]string{"10.1.0.1:80": "OK"}, got.Health); diff != "" {
		t.Errorf("after an unread pass (-want +got):\n%s", diff)
	}
	if got := put([]plan.Backend{a, b}, nil, stand("new", "10.1.0.1:80")); len(got.Health) != 0 {
		t.Errorf("a new pod at an old pod's address borrows its health: %v", got.Health)
	}
	drained := b
	drained.Drain = true
	got = put([]plan.Backend{a, drained}, &oci.BackendSetHealth{Status: "CRITICAL", Critical: []string{"10.1.0.1:80"}}, nil)
	want := Set{Serving: map[string]bool{"10.1.0.1:80": true}, Health: map[string]string{"10.1.0.1:80": "CRITICAL"}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("after a read (-want +got):\n%s", diff)
	}
	// An overall UNKNOWN or CRITICAL that lists no backend (no probes sent
	// yet) is not OK for anyone.
	for _, status := range []string{"UNKNOWN", "CRITICAL"} {
		if got := put([]plan.Backend{a}, &oci.BackendSetHealth{Status: status}, nil); got.Health["10.1.0.1:80"] != status {
			t.Errorf("overall %s, nothing listed: %v", status, got.Health)
		}
	}
	s.Forget("web")
	if _, ok := s.Get("web"); ok {
		t.Error("a forgotten resource is still known")
	}
}
