package status

import (
	"fmt"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/peppy-ratio/lbregistrar/api/v1beta1"
	"github.com/peppy-ratio/lbregistrar/reconciler/oci"
)

func TestSummarizeHealth(t *testing.T) {
	own := func(ips ...string) []v1beta1.Backend {
		var out []v1beta1.Backend
		for _, ip := range ips {
			out = append(out, v1beta1.Backend{IP: ip, Port: 30080, Weight: 1})
		}
		return out
	}
	many := make([]string, 12)
	for i := range many {
		many[i] = fmt.Sprintf("10.0.0.%d", 10+i)
	}
	tests := []struct {
		name   string
		owned  []v1beta1.Backend
		health oci.BackendSetHealth
		want   v1beta1.BackendSetHealth
	}{
		{
			name:  "own backends OCI does not list are OK",
			owned: own("10.0.0.1", "10.0.0.2"), health: oci.BackendSetHealth{Status: "OK"},
			want: v1beta1.BackendSetHealth{Status: "OK", OK: 2},
		},
		{
			name:  "foreign backends in OCI's lists are not counted",
			owned: own("10.0.0.1"),
			health: oci.BackendSetHealth{Status: "CRITICAL", Critical: []string{"192.168.9.9:30080", "10.0.0.1:8080"},
				Unknown: []string{"ocid1.instance.oc1..other:30080"}},
			want: v1beta1.BackendSetHealth{Status: "CRITICAL", OK: 1},
		},
		{
			name:  "each state counted; critical named before warning, unknown not named",
			owned: own("10.0.0.1", "10.0.0.2", "10.0.0.3", "10.0.0.4"),
			health: oci.BackendSetHealth{Status: "WARNING", Warning: []string{"10.0.0.1:30080"},
				Critical: []string{"10.0.0.3:30080"}, Unknown: []string{"10.0.0.4:30080"}},
			want: v1beta1.BackendSetHealth{Status: "WARNING", OK: 1, Warning: 1, Critical: 1, Unknown: 1,
				Unhealthy: []string{"10.0.0.3:30080", "10.0.0.1:30080"}},
		},
		{
			name:  "names are compared as addresses, IPv6 with or without brackets",
			owned: []v1beta1.Backend{{IP: "fd00:0::1", Port: 30080}, {IP: "fd00::2", Port: 30080}, {IP: "::ffff:10.0.0.1", Port: 30080}},
			health: oci.BackendSetHealth{Status: "CRITICAL",
				Critical: []string{"fd00::1:30080", "[fd00::2]:30080", "10.0.0.1:30080"}},
			want: v1beta1.BackendSetHealth{Status: "CRITICAL", Critical: 3,
				Unhealthy: []string{"10.0.0.1:30080", "[fd00::1]:30080", "[fd00::2]:30080"}},
		},
		{
			name:  "at most ten named, all counted",
			owned: own(many...),
			health: oci.BackendSetHealth{Status: "CRITICAL", Critical: func() []string {
				var names []string
				for _, ip := range many {
					names = append(names, ip+":30080")
				}
				return names
			}()},
			want: v1beta1.BackendSetHealth{Status: "CRITICAL", Critical: 12, Unhealthy: []string{
				"10.0.0.10:30080", "10.0.0.11:30080", "10.0.0.12:30080", "10.0.0.13:30080", "10.0.0.14:30080",
				"10.0.0.15:30080", "10.0.0.16:30080", "10.0.0.17:30080", "10.0.0.18:30080", "10.0.0.19:30080"}},
		},
		{
			name:   "no own backends",
			health: oci.BackendSetHealth{Status: "CRITICAL", Critical: []string{"192.168.9.9:30080"}},
			want:   v1beta1.BackendSetHealth{Status: "CRITICAL"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if d := cmp.Diff(&tc.want, summarizeHealth(tc.owned, &tc.health)); d != "" {
				t.Errorf("(-want +got):\n%s", d)
			}
		})
	}
}

func TestHealthyCount(t *testing.T) {
	tests := []struct {
		sets []v1beta1.BackendSetStatus
		want string
	}{
		{nil, ""},
		{[]v1beta1.BackendSetStatus{{Name: "a"}}, ""},
		{[]v1beta1.BackendSetStatus{
			{Name: "a", Health: &v1beta1.BackendSetHealth{OK: 2, Critical: 1}},
			{Name: "b"}, // not read: not counted
			{Name: "c", Health: &v1beta1.BackendSetHealth{OK: 1, Warning: 1, Unknown: 1}},
		}, "3/6"},
		{[]v1beta1.BackendSetStatus{{Name: "a", Health: &v1beta1.BackendSetHealth{}}}, "0/0"},
	}
	for _, tc := range tests {
		if got := healthyCount(tc.sets); got != tc.want {
			t.Errorf("healthyCount(%+v) = %q, want %q", tc.sets, got, tc.want)
		}
	}
}

func TestUnhealthyMessage(t *testing.T) {
	h := &v1beta1.BackendSetHealth{Critical: 11, Warning: 1, Unhealthy: []string{"10.0.0.1:30080", "10.0.0.2:30080"}}
	want := `backend set "web": OCI reports 12 of this resource's backends unhealthy (11 critical, 1 warning): 10.0.0.1:30080, 10.0.0.2:30080 and 10 more`
	if got := unhealthyMessage("web", h); got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
}

// A flight that leaves health unread (a reconcile is parked behind it)
// keeps Degraded as the health recorded before says.
func TestKeepHealth(t *testing.T) {
	obj := &v1beta1.LBRegistrar{Status: v1beta1.LBRegistrarStatus{BackendSets: []v1beta1.BackendSetStatus{
		{Name: "api", Health: &v1beta1.BackendSetHealth{Status: "OK", OK: 2}},
		{Name: "web", Health: &v1beta1.BackendSetHealth{Status: "CRITICAL", Critical: 1, Unhealthy: []string{"10.0.0.1:30080"}}},
		{Name: "new"},
	}}}
	var out Outcome
	KeepHealth(obj, &out)
	want := []string{unhealthyMessage("web", obj.Status.BackendSets[1].Health)}
	if !slices.Equal(out.Unhealthy, want) {
		t.Errorf("unhealthy %q, want %q", out.Unhealthy, want)
	}
}
