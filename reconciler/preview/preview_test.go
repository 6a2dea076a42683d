package preview

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/peppy-ratio/lbregistrar/api/v1beta1"
	"github.com/peppy-ratio/lbregistrar/reconciler/desired"
	"github.com/peppy-ratio/lbregistrar/reconciler/plan"
)

func TestDescribe(t *testing.T) {
	b := func(ip string, port, weight int32) plan.Backend {
		return plan.Backend{IP: ip, Port: port, Weight: weight}
	}
	owned := func(ip string, port, weight int32) v1beta1.Backend {
		return v1beta1.Backend{IP: ip, Port: port, Weight: weight}
	}
	want := func(ip string, port, weight int32) desired.Backend {
		return desired.Backend{IP: ip, Port: port, Weight: weight}
	}
	tests := []struct {
		name string
		in   plan.Input
		want BackendSetChange
	}{
		{
			name: "taken over as left: adopted, foreign kept",
			in: plan.Input{Current: []plan.Backend{b("10.0.0.1", 30080, 1), b("192.168.9.9", 80, 1)},
				Desired: []desired.Backend{want("10.0.0.1", 30080, 1)}},
			want: BackendSetChange{Kept: []KeptBackend{{"10.0.0.1:30080", 1, false}, {"192.168.9.9:80", 1, true}}},
		},
		{
			name: "a node joins, another leaves, one is re-weighted",
			in: plan.Input{Current: []plan.Backend{b("10.0.0.1", 30080, 1), b("10.0.0.2", 30080, 1), b("10.0.0.3", 30080, 1)},
				Owned:   []v1beta1.Backend{owned("10.0.0.1", 30080, 1), owned("10.0.0.2", 30080, 1), owned("10.0.0.3", 30080, 1)},
				Desired: []desired.Backend{want("10.0.0.1", 30080, 1), want("10.0.0.3", 30080, 5), want("10.0.0.4", 30080, 1)}},
			want: BackendSetChange{
				Added:      []BackendWeight{{"10.0.0.4:30080", 1}},
				Removed:    []BackendWeight{{"10.0.0.2:30080", 1}},
				Reweighted: []Reweighted{{"10.0.0.3:30080", 1, 5}},
				Kept:       []KeptBackend{{"10.0.0.1:30080", 1, false}},
			},
		},
		{
			name: "removed from the spec: owned ones go, one another resource records stays",
			in: plan.Input{Mode: plan.Remove, Current: []plan.Backend{b("10.0.0.1", 30080, 1), b("10.0.0.2", 30080, 1)},
				Owned:     []v1beta1.Backend{owned("10.0.0.1", 30080, 1), owned("10.0.0.2", 30080, 1)},
				Protected: map[string]bool{"10.0.0.2:30080": true}},
			want: BackendSetChange{Removed: []BackendWeight{{"10.0.0.1:30080", 1}}, Kept: []KeptBackend{{"10.0.0.2:30080", 1, true}}},
		},
		{
			name: "a wanted backend left drained, another offline: both serve again",
			in: plan.Input{Current: []plan.Backend{{IP: "10.0.0.1", Port: 30080, Weight: 1, Drain: true}, {IP: "10.0.0.2", Port: 30080, Weight: 1, Offline: true}},
				Desired: []desired.Backend{want("10.0.0.1", 30080, 1), want("10.0.0.2", 30080, 1)}},
			want: BackendSetChange{Restored: []BackendWeight{{"10.0.0.1:30080", 1}, {"10.0.0.2:30080", 1}}},
		},
		{
			name: "pods added beside the nodes past OCI's limit: withheld, named",
			in: plan.Input{Current: []plan.Backend{b("10.0.0.1", 30080, 1), b("10.0.0.2", 30080, 1)},
				Owned:   []v1beta1.Backend{owned("10.0.0.1", 30080, 1), owned("10.0.0.2", 30080, 1)},
				Desired: []desired.Backend{want("10.0.0.1", 30080, 1), want("10.0.0.2", 30080, 1), want("10.1.0.7", 8080, 1), want("10.1.0.8", 8080, 1)}, Limit: 3},
			want: BackendSetChange{Added: []BackendWeight{{"10.1.0.7:8080", 1}}, Kept: []KeptBackend{{"10.0.0.1:30080", 1, false}, {"10.0.0.2:30080", 1, false}},
				Withheld: []string{"10.1.0.8:8080"}, Limit: 3},
		},
		{
			name: "a departing node's backend is drained until the period is over; one drained before stays so",
			in: plan.Input{Current: []plan.Backend{b("10.0.0.1", 30080, 1), b("10.0.0.2", 30080, 1), {IP: "10.0.0.3", Port: 30080, Weight: 1, Drain: true}},
				Owned:    []v1beta1.Backend{owned("10.0.0.1", 30080, 1), owned("10.0.0.2", 30080, 1), owned("10.0.0.3", 30080, 1)},
				Desired:  []desired.Backend{want("10.0.0.1", 30080, 1)},
				Draining: map[string]time.Time{"10.0.0.3:30080": drainNow.Add(-time.Minute)}, DrainFor: 2 * time.Minute, Now: drainNow},
			want: BackendSetChange{Kept: []KeptBackend{{"10.0.0.1:30080", 1, false}}, Draining: []DrainingBackend{
				{"10.0.0.2:30080", 1, drainNow.Add(2 * time.Minute), true}, {"10.0.0.3:30080", 1, drainNow.Add(time.Minute), false}}},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := plan.Compute(tc.in)
			got := Describe(BackendSetChange{}, tc.in.Current, &p, tc.in.DrainFor, tc.in.Limit)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("describe (-want +got):\n%s", diff)
			}
			if got.Changed() != p.Changed() {
				t.Errorf("Changed() = %v, the plan's %v", got.Changed(), p.Changed())
			}
		})
	}
}

// drainNow is when TestDescribe's drains are planned, to the second as the
// record keeps it.
var drainNow = time.Date(2026, 11, 25, 10, 0, 0, 0, time.UTC)

// An Event's note has at most 1 kB: a change of thousands of backends names five of each kind.
func TestDetailsIsBounded(t *testing.T) {
	c := BackendSetChange{Reweighted: []Reweighted{{"10.0.0.1:30080", 1, 5}}}
	for i := range 7 {
		c.Added = append(c.Added, BackendWeight{strings.Repeat("1", i+1) + ":30080", 1})
	}
	want := "add 1:30080 weight 1, 11:30080 weight 1, 111:30080 weight 1, 1111:30080 weight 1, 11111:30080 weight 1 and 2 more; " +
		"re-weight 10.0.0.1:30080 weight 1 to 5"
	if got := c.Details(); got != want {
		t.Errorf("Details() = %q, want %q", got, want)
	}
	if got, want := c.Summary(), "7 to add, 0 to remove, 1 to re-weight"; got != want {
		t.Errorf("Summary() = %q, want %q", got, want)
	}
}
