package readiness

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/peppy-ratio/lbregistrar/reconciler/oci"
	"github.com/peppy-ratio/lbregistrar/reconciler/plan"
)

// A reconcile that did not read health (another was parked behind it)
// keeps the states last read of the backends still served; a backend added
// since has none until the next read, not a borrowed OK.
func TestStoreKeepsHealthAcrossAnUnreadPass(t *testing.T) {
	var s Store
	a, b := plan.Backend{IP: "10.1.0.1", Port: 80}, plan.Backend{IP: "10.1.0.2", Port: 80}
	s.Put("lb", "web", []plan.Backend{a}, &oci.BackendSetHealth{Status: "OK"})
	s.Put("lb", "web", []plan.Backend{a, b}, nil)
	got, ok := s.Get("lb", "web")
	want := Seen{Serving: map[string]bool{"10.1.0.1:80": true, "10.1.0.2:80": true}, Health: map[string]string{"10.1.0.1:80": "OK"}}
	if diff := cmp.Diff(want, got); !ok || diff != "" {
		t.Errorf("after an unread pass (-want +got):\n%s", diff)
	}
	drained := b
	drained.Drain = true
	s.Put("lb", "web", []plan.Backend{a, drained}, &oci.BackendSetHealth{Status: "CRITICAL", Critical: []string{"10.1.0.1:80"}})
	got, _ = s.Get("lb", "web")
	want = Seen{Serving: map[string]bool{"10.1.0.1:80": true}, Health: map[string]string{"10.1.0.1:80": "CRITICAL"}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("after a read (-want +got):\n%s", diff)
	}
}
