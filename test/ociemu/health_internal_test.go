package ociemu

import (
	"testing"

	"github.com/oracle/oci-go-sdk/v65/common"
	"github.com/oracle/oci-go-sdk/v65/loadbalancer"
	"github.com/oracle/oci-go-sdk/v65/networkloadbalancer"
)

// The overall rule of BackendSetHealth.Status, at its boundaries.
func TestOverallHealth(t *testing.T) {
	tests := []struct {
		ok, unknown, total int
		want               string
	}{
		{0, 0, 0, healthUnknown},
		{3, 0, 3, healthOK},
		{1, 2, 3, healthUnknown},  // more than half UNKNOWN
		{2, 2, 4, healthWarning},  // half UNKNOWN is not more than half
		{2, 0, 4, healthWarning},  // half OK
		{1, 0, 3, healthCritical}, // fewer than half OK
		{0, 1, 2, healthCritical},
	}
	for _, tc := range tests {
		if got := overallHealth(tc.ok, tc.unknown, tc.total); got != tc.want {
			t.Errorf("overallHealth(ok %d, unknown %d, total %d) = %s, want %s", tc.ok, tc.unknown, tc.total, got, tc.want)
		}
	}
}

func TestIsLoopback(t *testing.T) {
	for ip, want := range map[string]bool{
		"127.0.0.1": true, "127.9.9.9": true, "::1": true, "::ffff:127.0.0.1": true,
		"10.0.0.99": false, "192.168.9.9": false, "fd00::1": false, "localhost": false, "": false, "0.0.0.0": false,
	} {
		if got := isLoopback(ip); got != want {
			t.Errorf("isLoopback(%q) = %v, want %v", ip, got, want)
		}
	}
}

// The prober lists a backend set's backends again only when the set
// changed or its load balancer was seeded again, and forgets sets that
// are gone: listing every backend each tick does not scale to 300 backend
// sets of 5,000 backends.
func TestProbeListRelistsOnlyWhatChanged(t *testing.T) {
	const classicID, networkID = "ocid1.loadbalancer.oc1.iad.probes", "ocid1.networkloadbalancer.oc1.iad.probes"
	tcp := &loadbalancer.HealthChecker{Protocol: common.String("TCP")}
	classicSet := func(backends ...loadbalancer.Backend) loadbalancer.BackendSet {
		return loadbalancer.BackendSet{Policy: common.String("ROUND_ROBIN"), HealthChecker: tcp, Backends: backends}
	}
	backend := func(ip string, port int) loadbalancer.Backend {
		return loadbalancer.Backend{IpAddress: common.String(ip), Port: common.Int(port)}
	}
	seed := Seed{
		LoadBalancers: []loadbalancer.LoadBalancer{{Id: common.String(classicID), BackendSets: map[string]loadbalancer.BackendSet{
			"a": classicSet(backend("127.0.0.1", 30001), backend("10.0.0.1", 30001)), // only loopback is checked
			"b": classicSet(backend("127.0.0.1", 30002)),
		}}},
		NetworkLoadBalancers: []networkloadbalancer.NetworkLoadBalancer{{Id: common.String(networkID), BackendSets: map[string]networkloadbalancer.BackendSet{
			"c": {IsPreserveSource: common.Bool(false), HealthChecker: &networkloadbalancer.HealthChecker{Protocol: networkloadbalancer.HealthCheckProtocolsTcp}, Backends: []networkloadbalancer.Backend{
				{IpAddress: common.String("127.0.0.1"), Port: common.Int(30003)},
			}},
		}}},
	}
	e := newEmulator(Options{})
	if err := e.SeedState(seed); err != nil {
		t.Fatal(err)
	}
	check := func(step string, wantTargets, wantLists int) {
		t.Helper()
		if got := len(e.probed.targets(e)); got != wantTargets || e.probed.lists != wantLists {
			t.Errorf("%s: %d targets after %d listings, want %d after %d", step, got, e.probed.lists, wantTargets, wantLists)
		}
	}
	check("seeded", 3, 3)
	check("nothing changed", 3, 3)

	b := e.balancers[classicID]
	set := b.classic.BackendSets["a"]
	set.Backends = append(set.Backends, backend("127.0.0.2", 30001))
	b.classic.BackendSets["a"] = set
	b.changed("a")
	check("one set changed", 4, 4)

	if err := e.SeedState(seed); err != nil {
		t.Fatal(err)
	}
	check("seeded again", 3, 7)

	delete(e.balancers, networkID)
	check("load balancer gone", 2, 7)
	if len(e.probed.sets) != 2 {
		t.Errorf("%d backend sets kept, want 2", len(e.probed.sets))
	}
}
