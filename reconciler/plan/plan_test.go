package plan

import (
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/peppy-ratio/lbregistrar/api/v1beta1"
	"github.com/peppy-ratio/lbregistrar/reconciler/desired"
)

func TestCompute(t *testing.T) {
	foreign := Backend{IP: "192.168.0.9", Port: 8080, Weight: 3, Backup: true, Offline: true}
	a := Backend{IP: "10.0.0.1", Port: 30080, Weight: 1}
	b := Backend{IP: "10.0.0.2", Port: 30080, Weight: 1}
	rec := func(bs ...Backend) []v1beta1.Backend {
		var out []v1beta1.Backend
		for _, x := range bs {
			out = append(out, v1beta1.Backend{IP: x.IP, Port: x.Port, Weight: x.Weight})
		}
		return out
	}
	want := func(bs ...Backend) []desired.Backend {
		var out []desired.Backend
		for _, x := range bs {
			out = append(out, desired.Backend{IP: x.IP, Port: x.Port, Weight: x.Weight})
		}
		return out
	}
	drained := func(x Backend) Backend { x.Drain = true; return x }
	offline := func(x Backend) Backend { x.Offline = true; return x }
	backup := func(x Backend) Backend { x.Backup = true; return x }
	weighted := func(x Backend, w int32) Backend { x.Weight = w; return x }

	tests := []struct {
		name     string
		in       Input
		backends []Backend
		owned    []v1beta1.Backend
		changed  bool
		// readdressed and instanceTaken are Plan's, where they are set.
		readdressed, instanceTaken []string
	}{
		{
			name:     "nothing changed, nothing written",
			in:       Input{Current: []Backend{foreign, a}, Owned: rec(a), Desired: want(a)},
			backends: []Backend{foreign, a}, owned: rec(a),
		},
		{
			name:     "add keeps foreign backend with all its flags",
			in:       Input{Current: []Backend{foreign, a}, Owned: rec(a), Desired: want(a, b)},
			backends: []Backend{foreign, a, b}, owned: rec(a, b), changed: true,
		},
		{
			name:     "remove only owned",
			in:       Input{Current: []Backend{foreign, a, b}, Owned: rec(a, b), Desired: want(a)},
			backends: []Backend{foreign, a}, owned: rec(a), changed: true,
		},
		{
			// OCI, the record and the node may write one IPv6 address differently.
			name: "IPv6 addresses compare as addresses, not as text",
			in: Input{Current: []Backend{{IP: "FD00:0::1", Port: 30080, Weight: 1}}, Owned: rec(Backend{IP: "fd00:0:0::1", Port: 30080, Weight: 1}),
				Desired: want(Backend{IP: "fd00::1", Port: 30080, Weight: 1})},
			backends: []Backend{{IP: "FD00:0::1", Port: 30080, Weight: 1}}, owned: rec(Backend{IP: "FD00:0::1", Port: 30080, Weight: 1}),
		},
		{
			name:     "foreign backend never removed even if not desired",
			in:       Input{Current: []Backend{foreign, b}, Owned: rec(b), Desired: want(b)},
			backends: []Backend{foreign, b}, owned: rec(b),
		},
		{
			name:     "weight change keeps backup",
			in:       Input{Current: []Backend{backup(a)}, Owned: rec(a), Desired: want(weighted(a, 5))},
			backends: []Backend{weighted(backup(a), 5)}, owned: rec(weighted(a, 5)), changed: true,
		},
		{
			// A wanted backend serves: a drain this resource's own deletion
			// or another's left behind is undone, weight and all.
			name:     "wanted backend left drained is undrained",
			in:       Input{Current: []Backend{drained(a)}, Owned: rec(a), Desired: want(weighted(a, 5))},
			backends: []Backend{weighted(a, 5)}, owned: rec(weighted(a, 5)), changed: true,
		},
		{
			name:     "wanted backend adopted while drained is undrained",
			in:       Input{Current: []Backend{foreign, drained(a)}, Desired: want(a)},
			backends: []Backend{foreign, a}, owned: rec(a), changed: true,
		},
		{
			name:     "wanted backend taken offline is brought back",
			in:       Input{Current: []Backend{offline(a), b}, Owned: rec(a, b), Desired: want(a, b)},
			backends: []Backend{a, b}, owned: rec(a, b), changed: true,
		},
		{
			// Another writer (a second cluster sharing the backend set)
			// undrained b during this resource's drain period: it wants b.
			name:     "after the drain, what another writer undrained is left to it",
			in:       Input{Mode: Remove, Drained: true, Current: []Backend{drained(a), b}, Owned: rec(a, b)},
			backends: []Backend{b}, changed: true,
		},
		{
			name:     "during the drain, what another writer undrained is not drained again",
			in:       Input{Mode: Drain, Drained: true, Current: []Backend{drained(a), b}, Owned: rec(a, b)},
			backends: []Backend{drained(a), b}, owned: rec(a),
		},
		{
			name:     "a removal with no drain before it removes what is not drained",
			in:       Input{Mode: Remove, Current: []Backend{a, b}, Owned: rec(a, b)},
			backends: []Backend{}, changed: true,
		},
		{
			name:     "a drained backend not wanted stays as it is in Hold",
			in:       Input{Mode: Hold, Current: []Backend{drained(a)}, Owned: rec(a)},
			backends: []Backend{drained(a)}, owned: rec(a),
		},
		{
			name:     "existing matching backend is adopted without a write",
			in:       Input{Current: []Backend{a}, Desired: want(a)},
			backends: []Backend{a}, owned: rec(a),
		},
		{
			name:     "a pod's backend someone else registered is not adopted, nor changed",
			in:       Input{Current: []Backend{weighted(a, 3)}, Desired: want(a), PodBackends: map[string]bool{want(a)[0].Key(): true}},
			backends: []Backend{weighted(a, 3)}, owned: nil,
		},
		{
			name:     "a pod's backend this resource owns is kept in line",
			in:       Input{Current: []Backend{weighted(a, 3)}, Owned: rec(a), Desired: want(a), PodBackends: map[string]bool{want(a)[0].Key(): true}},
			backends: []Backend{a}, owned: rec(a), changed: true,
		},
		{
			name:     "owned backend removed from outside is added back",
			in:       Input{Current: []Backend{foreign}, Owned: rec(a), Desired: want(a)},
			backends: []Backend{foreign, a}, owned: rec(a), changed: true,
		},
		{
			name:     "owned backend gone and no longer desired is forgotten",
			in:       Input{Current: []Backend{foreign}, Owned: rec(a), Desired: nil},
			backends: []Backend{foreign}, owned: nil,
		},
		{
			name:     "hold keeps everything",
			in:       Input{Mode: Hold, Current: []Backend{foreign, a, b}, Owned: rec(a, b)},
			backends: []Backend{foreign, a, b}, owned: rec(a, b),
		},
		{
			name:     "drain marks owned backends only",
			in:       Input{Mode: Drain, Current: []Backend{foreign, a, b}, Owned: rec(a, b)},
			backends: []Backend{foreign, drained(a), drained(b)}, owned: rec(a, b), changed: true,
		},
		{
			name:     "drain twice writes once",
			in:       Input{Mode: Drain, Current: []Backend{drained(a)}, Owned: rec(a)},
			backends: []Backend{drained(a)}, owned: rec(a),
		},
		{
			name:     "remove takes out owned, keeps foreign",
			in:       Input{Mode: Remove, Current: []Backend{foreign, drained(a), b}, Owned: rec(a, b)},
			backends: []Backend{foreign}, owned: nil, changed: true,
		},
		{
			name:     "protected backend survives removal and leaves the record",
			in:       Input{Mode: Remove, Current: []Backend{a, b}, Owned: rec(a, b), Protected: map[string]bool{a.Key(): true}},
			backends: []Backend{a}, owned: nil, changed: true,
		},
		{
			// In a source-preserving NLB backend set: someone registered the
			// node's instance; another backend of it would be a duplicate.
			name: "a node registered by instance alone is there already",
			in: Input{Current: []Backend{{TargetID: "ocid1.instance.a", Port: 30080, Weight: 2}},
				Desired: []desired.Backend{{IP: "10.0.0.1", Port: 30080, Weight: 1, TargetID: "ocid1.instance.a"}}},
			backends: []Backend{{TargetID: "ocid1.instance.a", Port: 30080, Weight: 2}},
		},
		{
			// Registered before the set preserved the source, or by the
			// original operator: OCI took it, and rewriting it would be a
			// write for nothing.
			name:     "a backend registered by address is found by its address and left so",
			in:       Input{Current: []Backend{a}, Desired: []desired.Backend{{IP: a.IP, Port: a.Port, Weight: a.Weight, TargetID: "ocid1.instance.a"}}},
			backends: []Backend{a}, owned: rec(a),
		},
		{
			name: "a new backend names its instance; one by instance alone stays as it is",
			in: Input{Current: []Backend{{TargetID: "ocid1.instance.other", Port: 30080, Weight: 1}, a}, Owned: rec(a),
				Desired: []desired.Backend{{IP: b.IP, Port: b.Port, Weight: b.Weight, TargetID: "ocid1.instance.b"}}},
			backends: []Backend{{TargetID: "ocid1.instance.other", Port: 30080, Weight: 1}, {IP: b.IP, TargetID: "ocid1.instance.b", Port: b.Port, Weight: b.Weight}},
			owned:    rec(b), changed: true,
		},
		{
			// The node keeps its instance, its address changes: OCI takes
			// the instance once, so the new backend replaces the old in one
			// write, with no gap, rather than waiting out a drain.
			name: "an instance's backend at its new address replaces the old one in the same write",
			in: Input{Current: []Backend{{IP: a.IP, TargetID: "ocid1.instance.a", Port: 30080, Weight: 1}}, Owned: rec(a),
				Desired: []desired.Backend{{IP: "10.0.0.9", Port: 30080, Weight: 1, TargetID: "ocid1.instance.a"}}, DrainFor: time.Minute},
			backends: []Backend{{IP: "10.0.0.9", TargetID: "ocid1.instance.a", Port: 30080, Weight: 1}},
			owned:    []v1beta1.Backend{{IP: "10.0.0.9", Port: 30080, Weight: 1}}, changed: true,
			readdressed: []string{a.Key()},
		},
		{
			name: "an instance another writer registered at another address is reported, not added",
			in: Input{Current: []Backend{{IP: a.IP, TargetID: "ocid1.instance.a", Port: 30080, Weight: 1}},
				Desired: []desired.Backend{{IP: "10.0.0.9", Port: 30080, Weight: 1, TargetID: "ocid1.instance.a"}}},
			backends:      []Backend{{IP: a.IP, TargetID: "ocid1.instance.a", Port: 30080, Weight: 1}},
			instanceTaken: []string{"10.0.0.9:30080"},
		},
		{
			name:     "protected backend is not drained",
			in:       Input{Mode: Drain, Current: []Backend{a}, Owned: rec(a), Protected: map[string]bool{a.Key(): true}},
			backends: []Backend{a}, owned: nil,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := Compute(tc.in)
			if p.Changed() != tc.changed {
				t.Errorf("Changed = %v, want %v (%+v)", p.Changed(), tc.changed, p)
			}
			if d := cmp.Diff(tc.backends, p.Backends); d != "" {
				t.Errorf("backends (-want +got):\n%s", d)
			}
			if d := cmp.Diff(tc.owned, p.Owned); d != "" {
				t.Errorf("owned (-want +got):\n%s", d)
			}
			if !slices.Equal(p.Readdressed, tc.readdressed) || !slices.Equal(p.InstanceTaken, tc.instanceTaken) {
				t.Errorf("readdressed %q, instance taken %q; want %q, %q", p.Readdressed, p.InstanceTaken, tc.readdressed, tc.instanceTaken)
			}
		})
	}
}

func TestIntent(t *testing.T) {
	owned := []v1beta1.Backend{{IP: "10.0.0.2", Port: 1, Weight: 1}}
	p := Compute(Input{Current: []Backend{{IP: "10.0.0.2", Port: 1, Weight: 1}}, Owned: owned,
		Desired: []desired.Backend{{IP: "10.0.0.1", Port: 1, Weight: 1}}})
	got := Intent(owned, &p)
	want := []v1beta1.Backend{{IP: "10.0.0.1", Port: 1, Weight: 1}, {IP: "10.0.0.2", Port: 1, Weight: 1}}
	if d := cmp.Diff(want, got); d != "" {
		t.Fatalf("intent (-want +got):\n%s", d)
	}
}

func TestKeyIsTheCanonicalHostPort(t *testing.T) {
	for _, tc := range []struct {
		ip   string
		port int32
		want string
	}{
		{"10.0.0.1", 30080, "10.0.0.1:30080"},
		{"010.0.0.1", 30080, "010.0.0.1:30080"}, // not an address ParseAddr takes
		{"::ffff:10.0.0.1", 30080, "10.0.0.1:30080"},
		{"255.255.255.255", 65535, "255.255.255.255:65535"},
		{"FD00:0::1", 31000, "[fd00::1]:31000"},
		{"fe80::1%eth0", 1, "[fe80::1%eth0]:1"},
		{"not-an-address", 80, "not-an-address:80"},
		{"", 0, ":0"},
	} {
		if got := Key(tc.ip, tc.port); got != tc.want {
			t.Errorf("Key(%q, %d) = %q, want %q", tc.ip, tc.port, got, tc.want)
		}
	}
}

// An owned backend no longer wanted is drained for DrainFor, then removed;
// wanted again before that, it serves again without being added anew.
func TestNodeDrain(t *testing.T) {
	now := time.Date(2026, 11, 25, 10, 0, 0, 0, time.UTC)
	period := time.Minute
	a := Backend{IP: "10.0.0.1", Port: 30080, Weight: 1}
	b := Backend{IP: "10.0.0.2", Port: 30080, Weight: 1}
	drained := func(x Backend) Backend { x.Drain = true; return x }
	owned := []v1beta1.Backend{{IP: a.IP, Port: a.Port, Weight: 1}, {IP: b.IP, Port: b.Port, Weight: 1}}
	wantA := []desired.Backend{{IP: a.IP, Port: a.Port, Weight: 1}}
	wantAB := []desired.Backend{{IP: a.IP, Port: a.Port, Weight: 1}, {IP: b.IP, Port: b.Port, Weight: 1}}
	since := func(t time.Time) map[string]time.Time { return map[string]time.Time{b.Key(): t} }
	draining := func(t time.Time) []v1beta1.DrainingBackend {
		return []v1beta1.DrainingBackend{{IP: b.IP, Port: b.Port, Since: metav1.NewTime(t)}}
	}
	tests := []struct {
		name     string
		in       Input
		want     Plan
		backends []Backend
	}{
		{
			name:     "a departing node is marked drain, not removed",
			in:       Input{Current: []Backend{a, b}, Owned: owned, Desired: wantA, DrainFor: period, Now: now},
			backends: []Backend{a, drained(b)},
			want:     Plan{Owned: owned, Draining: draining(now), Updated: []string{b.Key()}, DrainStarted: []string{b.Key()}, DrainsUntil: now.Add(period)},
		},
		{
			// Someone else (a person, another tool) drained it already.
			name:     "one found drained starts its drain without a write",
			in:       Input{Current: []Backend{a, drained(b)}, Owned: owned, Desired: wantA, DrainFor: period, Now: now},
			backends: []Backend{a, drained(b)},
			want:     Plan{Owned: owned, Draining: draining(now), DrainStarted: []string{b.Key()}, DrainsUntil: now.Add(period)},
		},
		{
			name:     "within the period it stays drained",
			in:       Input{Current: []Backend{a, drained(b)}, Owned: owned, Desired: wantA, DrainFor: period, Now: now, Draining: since(now.Add(-30 * time.Second))},
			backends: []Backend{a, drained(b)},
			want:     Plan{Owned: owned, Draining: draining(now.Add(-30 * time.Second)), DrainsUntil: now.Add(30 * time.Second)},
		},
		{
			name:     "after the period it is removed",
			in:       Input{Current: []Backend{a, drained(b)}, Owned: owned, Desired: wantA, DrainFor: period, Now: now, Draining: since(now.Add(-period))},
			backends: []Backend{a},
			want:     Plan{Owned: owned[:1], Removed: []string{b.Key()}, DrainEnded: []string{b.Key()}},
		},
		{
			name:     "wanted again before the period ends, it serves again",
			in:       Input{Current: []Backend{a, drained(b)}, Owned: owned, Desired: wantAB, DrainFor: period, Now: now, Draining: since(now.Add(-30 * time.Second))},
			backends: []Backend{a, b},
			want:     Plan{Owned: owned, Updated: []string{b.Key()}, DrainCalledOff: []string{b.Key()}},
		},
		{
			// Another cluster sharing the backend set wants the node: it
			// undid the drain, and the backend is its to keep.
			name:     "undrained by another writer meanwhile, it is left and forgotten",
			in:       Input{Current: []Backend{a, b}, Owned: owned, Desired: wantA, DrainFor: period, Now: now, Draining: since(now.Add(-30 * time.Second))},
			backends: []Backend{a, b},
			want:     Plan{Owned: owned[:1]},
		},
		{
			// The spec no longer names the backend set: every owned backend
			// departs, and the record goes with the last.
			name:     "retired, every owned backend is drained first",
			in:       Input{Mode: Retire, Current: []Backend{a, b}, Owned: owned, DrainFor: period, Now: now},
			backends: []Backend{drained(a), drained(b)},
			want: Plan{Owned: owned, Draining: []v1beta1.DrainingBackend{{IP: a.IP, Port: a.Port, Since: metav1.NewTime(now)}, {IP: b.IP, Port: b.Port, Since: metav1.NewTime(now)}},
				Updated: []string{a.Key(), b.Key()}, DrainStarted: []string{a.Key(), b.Key()}, DrainsUntil: now.Add(period)},
		},
		{
			name:     "retired, after the period they are removed",
			in:       Input{Mode: Retire, Current: []Backend{drained(a), drained(b)}, Owned: owned, DrainFor: period, Now: now, Draining: map[string]time.Time{a.Key(): now.Add(-period), b.Key(): now.Add(-period)}},
			backends: []Backend{},
			want:     Plan{Removed: []string{a.Key(), b.Key()}, DrainEnded: []string{a.Key(), b.Key()}},
		},
		{
			name:     "with no drain period it is removed at once",
			in:       Input{Current: []Backend{a, b}, Owned: owned, Desired: wantA, Now: now},
			backends: []Backend{a},
			want:     Plan{Owned: owned[:1], Removed: []string{b.Key()}},
		},
		{
			name:     "held, a drain keeps its time and nothing is removed",
			in:       Input{Mode: Hold, Current: []Backend{a, drained(b)}, Owned: owned, DrainFor: period, Now: now, Draining: since(now.Add(-time.Hour))},
			backends: []Backend{a, drained(b)},
			want:     Plan{Owned: owned, Draining: draining(now.Add(-time.Hour))},
		},
		{
			name:     "gone from the backend set, it leaves both records",
			in:       Input{Current: []Backend{a}, Owned: owned, Desired: wantA, DrainFor: period, Now: now, Draining: since(now)},
			backends: []Backend{a},
			want:     Plan{Owned: owned[:1]},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Compute(tt.in)
			tt.want.Backends = tt.backends
			if diff := cmp.Diff(tt.want, got, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("plan (-want +got):\n%s", diff)
			}
		})
	}
}

// A drain the write starts counts from when its work request ended; one
// already under way keeps its time.
func TestDrainTookEffect(t *testing.T) {
	now := time.Date(2026, 11, 25, 10, 0, 0, 0, time.UTC)
	period := time.Minute
	a := Backend{IP: "10.0.0.1", Port: 30080, Weight: 1}
	b := Backend{IP: "10.0.0.2", Port: 30080, Weight: 1}
	c := Backend{IP: "10.0.0.3", Port: 30080, Weight: 1, Drain: true}
	owned := []v1beta1.Backend{{IP: a.IP, Port: a.Port, Weight: 1}, {IP: b.IP, Port: b.Port, Weight: 1}, {IP: c.IP, Port: c.Port, Weight: 1}}
	p := Compute(Input{
		Current: []Backend{a, b, c}, Owned: owned, Desired: []desired.Backend{{IP: a.IP, Port: a.Port, Weight: 1}},
		DrainFor: period, Now: now, Draining: map[string]time.Time{c.Key(): now.Add(-50 * time.Second)},
	})
	ended := now.Add(30 * time.Second)
	p.DrainTookEffect(ended, period)
	want := []v1beta1.DrainingBackend{
		{IP: b.IP, Port: b.Port, Since: metav1.NewTime(ended)},
		{IP: c.IP, Port: c.Port, Since: metav1.NewTime(now.Add(-50 * time.Second))},
	}
	if diff := cmp.Diff(want, p.Draining); diff != "" {
		t.Errorf("drain record (-want +got):\n%s", diff)
	}
	if want := now.Add(10 * time.Second); !p.DrainsUntil.Equal(want) {
		t.Errorf("DrainsUntil = %s, want %s (c's drain ends first)", p.DrainsUntil, want)
	}
	p.Draining = p.Draining[:1]
	p.DrainTookEffect(ended, period)
	if want := ended.Add(period); !p.DrainsUntil.Equal(want) {
		t.Errorf("DrainsUntil = %s, want %s", p.DrainsUntil, want)
	}
}

// With NoAdds, what OCI refused to add is left out and named, and the rest
// of the plan (removals, weights) stands.
func TestNoAddsWithholdsOnlyAdditions(t *testing.T) {
	a := Backend{IP: "10.0.0.1", Port: 30080, Weight: 1}
	b := Backend{IP: "10.0.0.2", Port: 30080, Weight: 1}
	got := Compute(Input{
		Current: []Backend{a, b},
		Owned:   []v1beta1.Backend{{IP: a.IP, Port: a.Port, Weight: 1}, {IP: b.IP, Port: b.Port, Weight: 1}},
		Desired: []desired.Backend{{IP: a.IP, Port: a.Port, Weight: 5}, {IP: "10.0.0.3", Port: 30080, Weight: 5}, {IP: "10.0.0.4", Port: 30080, Weight: 5}},
		NoAdds:  true,
	})
	a.Weight = 5
	want := Plan{Backends: []Backend{a}, Owned: []v1beta1.Backend{{IP: a.IP, Port: a.Port, Weight: 5}},
		Removed: []string{b.Key()}, Updated: []string{a.Key()}, Withheld: []string{"10.0.0.3:30080", "10.0.0.4:30080"}}
	if diff := cmp.Diff(want, got, cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("plan (-want +got):\n%s", diff)
	}
}

// A rollout whose additions OCI refuses (a shared load balancer full) keeps
// the backends it replaces as they are, serving or draining, rather than
// emptying the set of this resource until the additions fit; once one
// wanted backend is in, the others leave as usual.
func TestNoAddsKeepsTheLastWhileReplacementsWait(t *testing.T) {
	old := Backend{IP: "10.1.0.1", Port: 8080, Weight: 1}
	draining := Backend{IP: "10.1.0.2", Port: 8080, Weight: 1, Drain: true}
	foreign := Backend{IP: "192.168.0.9", Port: 8080, Weight: 1}
	since := time.Unix(1000, 0)
	in := Input{Mode: Apply, NoAdds: true, Current: []Backend{old, draining, foreign}, DrainFor: time.Minute, Now: since.Add(time.Hour),
		Owned:    []v1beta1.Backend{{IP: old.IP, Port: 8080, Weight: 1}, {IP: draining.IP, Port: 8080, Weight: 1}},
		Draining: map[string]time.Time{draining.Key(): since},
		Desired:  []desired.Backend{{IP: "10.1.0.3", Port: 8080, Weight: 1}}}
	got := Compute(in)
	if got.Changed() || !slices.Equal(got.Withheld, []string{"10.1.0.3:8080"}) {
		t.Errorf("starved: changed %v (added %v, removed %v, updated %v), withheld %v; want nothing written, 10.1.0.3 withheld",
			got.Changed(), got.Added, got.Removed, got.Updated, got.Withheld)
	}
	if d := cmp.Diff([]Backend{old, draining, foreign}, got.Backends); d != "" {
		t.Errorf("backends (-want +got):\n%s", d)
	}
	if len(got.Owned) != 2 || len(got.Draining) != 1 {
		t.Errorf("the kept backends stay in the record as they were: owned %v, draining %v", got.Owned, got.Draining)
	}

	// The same when the limit leaves no room, the others' backends filling
	// the load balancer.
	in.NoAdds, in.Limit = false, 2
	if got := Compute(in); got.Changed() || len(got.Withheld) != 1 {
		t.Errorf("no room: changed %v, withheld %v; want nothing written", got.Changed(), got.Withheld)
	}

	in.NoAdds, in.Limit = true, 0
	in.Current = append(in.Current, Backend{IP: "10.1.0.3", Port: 8080, Weight: 1})
	in.Desired = append(in.Desired, desired.Backend{IP: "10.1.0.4", Port: 8080, Weight: 1})
	got = Compute(in)
	if !slices.Contains(got.Removed, draining.Key()) || !slices.Contains(got.DrainStarted, old.Key()) {
		t.Errorf("with a replacement in: removed %v, drains started %v; want the drained one removed, the other drained", got.Removed, got.DrainStarted)
	}
}

// With Limit, additions fill the room the backend set has left, in backend
// order, and the rest is withheld; what stays (a draining backend too)
// counts against it.
func TestLimitWithholdsAdditionsPastIt(t *testing.T) {
	a := Backend{IP: "10.0.0.1", Port: 30080, Weight: 1}
	foreign := Backend{IP: "10.0.0.9", Port: 30080, Weight: 1}
	in := Input{
		Current: []Backend{a, foreign},
		Owned:   []v1beta1.Backend{{IP: a.IP, Port: a.Port, Weight: 1}},
		Desired: []desired.Backend{{IP: "10.0.0.3", Port: 30080, Weight: 1}, {IP: "10.0.0.2", Port: 30080, Weight: 1}},
		Limit:   3, DrainFor: time.Minute, Now: time.Unix(1000, 0),
	}
	got := Compute(in)
	if !slices.Equal(got.Added, []string{"10.0.0.2:30080"}) || !slices.Equal(got.Withheld, []string{"10.0.0.3:30080"}) || len(got.Backends) != 3 {
		t.Errorf("limit 3 with a draining and a foreign backend: added %v, withheld %v, backends %v", got.Added, got.Withheld, got.Backends)
	}
	in.Limit = 1 // already past it: nothing is added, nothing removed for it
	if got := Compute(in); len(got.Added) != 0 || len(got.Withheld) != 2 || len(got.Removed) != 0 {
		t.Errorf("limit 1: added %v, withheld %v, removed %v", got.Added, got.Withheld, got.Removed)
	}
	in.Limit = 0
	if got := Compute(in); len(got.Added) != 2 || len(got.Withheld) != 0 {
		t.Errorf("no limit: added %v, withheld %v", got.Added, got.Withheld)
	}
}
