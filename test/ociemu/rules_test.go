package ociemu_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/oracle/oci-go-sdk/v65/common"
	"github.com/oracle/oci-go-sdk/v65/loadbalancer"
	"github.com/oracle/oci-go-sdk/v65/networkloadbalancer"

	"github.com/peppy-ratio/lbregistrar/test/ociemu"
)

// Each documented rule on a backend's or a backend set's values refuses a
// write that breaks it (400 InvalidParameter, nothing changed) and takes
// the values at its edges (rules.go cites the sources).
func TestDocumentedValueRules(t *testing.T) {
	f := newFixture(t, ociemu.Options{}, false)
	web := f.classicSet(t).BackendSet
	classic := func(change func(*loadbalancer.UpdateBackendSetDetails)) error {
		d := classicDetails(web, loadbalancer.BackendDetails{IpAddress: common.String("10.0.5.1"), Port: common.Int(80)})
		change(&d)
		resp, err := f.lb.UpdateBackendSet(f.context, loadbalancer.UpdateBackendSetRequest{LoadBalancerId: common.String(classicID),
			BackendSetName: common.String("web"), UpdateBackendSetDetails: d})
		if err == nil {
			f.waitClassic(t, *resp.OpcWorkRequestId)
		}
		return err
	}
	tcp := f.networkSet(t).BackendSet
	network := func(change func(*networkloadbalancer.UpdateBackendSetDetails)) error {
		d := networkloadbalancer.UpdateBackendSetDetails{Policy: common.String(string(tcp.Policy)), IsPreserveSource: tcp.IsPreserveSource,
			HealthChecker: &networkloadbalancer.HealthCheckerDetails{Protocol: tcp.HealthChecker.Protocol, Port: tcp.HealthChecker.Port},
			Backends:      []networkloadbalancer.BackendDetails{{IpAddress: common.String("10.0.5.1"), Port: common.Int(80)}}}
		change(&d)
		resp, err := f.nlb.UpdateBackendSet(f.context, networkloadbalancer.UpdateBackendSetRequest{NetworkLoadBalancerId: common.String(networkID),
			BackendSetName: common.String("tcp"), UpdateBackendSetDetails: d})
		if err == nil {
			f.waitNetwork(t, *resp.OpcWorkRequestId)
		}
		return err
	}
	backend := func(d *loadbalancer.UpdateBackendSetDetails) *loadbalancer.BackendDetails { return &d.Backends[0] }
	nlbBackend := func(d *networkloadbalancer.UpdateBackendSetDetails) *networkloadbalancer.BackendDetails {
		return &d.Backends[0]
	}
	tests := []struct {
		rule     string
		refused  func() error
		accepted func() error
	}{
		{"a classic backend's weight is from 1 to 100",
			func() error {
				return classic(func(d *loadbalancer.UpdateBackendSetDetails) { backend(d).Weight = common.Int(101) })
			},
			func() error {
				return classic(func(d *loadbalancer.UpdateBackendSetDetails) { backend(d).Weight = common.Int(100) })
			}},
		{"a classic backend's weight is not 0",
			func() error {
				return classic(func(d *loadbalancer.UpdateBackendSetDetails) { backend(d).Weight = common.Int(0) })
			},
			func() error {
				return classic(func(d *loadbalancer.UpdateBackendSetDetails) { backend(d).Weight = common.Int(1) })
			}},
		{"an NLB backend's weight is from 1 to 100",
			func() error {
				return network(func(d *networkloadbalancer.UpdateBackendSetDetails) { nlbBackend(d).Weight = common.Int(101) })
			},
			func() error {
				return network(func(d *networkloadbalancer.UpdateBackendSetDetails) { nlbBackend(d).Weight = common.Int(100) })
			}},
		{"maxConnections is 0 or at least 256",
			func() error {
				return classic(func(d *loadbalancer.UpdateBackendSetDetails) { backend(d).MaxConnections = common.Int(255) })
			},
			func() error {
				return classic(func(d *loadbalancer.UpdateBackendSetDetails) { backend(d).MaxConnections = common.Int(256) })
			}},
		{"backendMaxConnections is 0 or at least 256",
			func() error {
				return classic(func(d *loadbalancer.UpdateBackendSetDetails) { d.BackendMaxConnections = common.Int(1) })
			},
			func() error {
				return classic(func(d *loadbalancer.UpdateBackendSetDetails) { d.BackendMaxConnections = common.Int(0) })
			}},
		{"a classic backend is IPv4",
			func() error {
				return classic(func(d *loadbalancer.UpdateBackendSetDetails) { backend(d).IpAddress = common.String("fd00::5:1") })
			},
			func() error {
				return classic(func(d *loadbalancer.UpdateBackendSetDetails) { backend(d).IpAddress = common.String("10.0.5.2") })
			}},
		{"a classic backend's port is from 1 to 65535",
			func() error {
				return classic(func(d *loadbalancer.UpdateBackendSetDetails) { backend(d).Port = common.Int(0) })
			},
			func() error {
				return classic(func(d *loadbalancer.UpdateBackendSetDetails) { backend(d).Port = common.Int(65535) })
			}},
		{"an IP_HASH backend set takes no backup backend",
			func() error {
				return classic(func(d *loadbalancer.UpdateBackendSetDetails) {
					d.Policy, backend(d).Backup = common.String("IP_HASH"), common.Bool(true)
				})
			},
			func() error {
				return classic(func(d *loadbalancer.UpdateBackendSetDetails) {
					d.Policy, backend(d).Backup = common.String("ROUND_ROBIN"), common.Bool(true)
				})
			}},
		{"an NLB backend of port 0 needs the health checker's port",
			func() error {
				return network(func(d *networkloadbalancer.UpdateBackendSetDetails) {
					nlbBackend(d).Port, d.HealthChecker.Port = common.Int(0), nil
				})
			},
			func() error {
				return network(func(d *networkloadbalancer.UpdateBackendSetDetails) { nlbBackend(d).Port = common.Int(0) })
			}},
	}
	for _, tc := range tests {
		t.Run(tc.rule, func(t *testing.T) {
			before := f.classicSet(t).ETag
			serviceError(t, tc.refused(), 400, "InvalidParameter")
			if after := f.classicSet(t).ETag; *after != *before {
				t.Error("a refused write changed the load balancer")
			}
			must(t, tc.accepted())
		})
	}

	// The same rules on the single-backend calls.
	_, err := f.lb.CreateBackend(f.context, loadbalancer.CreateBackendRequest{LoadBalancerId: common.String(classicID), BackendSetName: common.String("web"),
		CreateBackendDetails: loadbalancer.CreateBackendDetails{IpAddress: common.String("10.0.5.9"), Port: common.Int(80), Weight: common.Int(0)}})
	serviceError(t, err, 400, "InvalidParameter")
	_, err = f.lb.UpdateBackend(f.context, loadbalancer.UpdateBackendRequest{LoadBalancerId: common.String(classicID), BackendSetName: common.String("web"),
		BackendName: common.String("10.0.5.2:65535"), UpdateBackendDetails: loadbalancer.UpdateBackendDetails{
			Weight: common.Int(1), Backup: common.Bool(false), Drain: common.Bool(false), Offline: common.Bool(false), MaxConnections: common.Int(7)}})
	serviceError(t, err, 400, "InvalidParameter")
	_, err = f.nlb.CreateBackend(f.context, networkloadbalancer.CreateBackendRequest{NetworkLoadBalancerId: common.String(networkID), BackendSetName: common.String("tcp"),
		CreateBackendDetails: networkloadbalancer.CreateBackendDetails{IpAddress: common.String("10.0.5.9"), Port: common.Int(80), Weight: common.Int(200)}})
	serviceError(t, err, 400, "InvalidParameter")
}

// A load balancer FAILED or DELETING takes no write, on either service.
func TestFailedLoadBalancerTakesNoWrite(t *testing.T) {
	f := newFixture(t, ociemu.Options{}, false)
	set := f.classicSet(t).BackendSet
	for _, state := range []loadbalancer.LoadBalancerLifecycleStateEnum{loadbalancer.LoadBalancerLifecycleStateFailed, loadbalancer.LoadBalancerLifecycleStateDeleting} {
		must(t, f.emu.SeedState(ociemu.Seed{LoadBalancers: []loadbalancer.LoadBalancer{{Id: common.String(classicID), LifecycleState: state,
			BackendSets: map[string]loadbalancer.BackendSet{"web": set}}}}))
		_, err := f.lb.UpdateBackendSet(f.context, loadbalancer.UpdateBackendSetRequest{LoadBalancerId: common.String(classicID),
			BackendSetName: common.String("web"), UpdateBackendSetDetails: classicDetails(set)})
		if se := serviceError(t, err, 409, "Conflict"); !strings.Contains(se.GetMessage(), string(state)) {
			t.Errorf("%s: %v", state, se)
		}
	}
}

// A seed contains only what OCI would accept: the same rules refuse it.
func TestSeedsFollowTheRules(t *testing.T) {
	emu, err := ociemu.Start(ociemu.Options{})
	must(t, err)
	defer emu.Close()
	hc := &loadbalancer.HealthChecker{Protocol: common.String("TCP")}
	err = emu.SeedState(ociemu.Seed{LoadBalancers: []loadbalancer.LoadBalancer{{Id: common.String("ocid1.loadbalancer.oc1.iad.bad"),
		BackendSets: map[string]loadbalancer.BackendSet{"my set": {Policy: common.String("ROUND_ROBIN"), HealthChecker: hc}}}}})
	if err == nil {
		t.Error("a seed with a backend set named \"my set\" was taken")
	}
	for _, be := range []loadbalancer.Backend{
		{IpAddress: common.String("10.0.0.1"), Port: common.Int(80), Weight: common.Int(0)},
		{IpAddress: common.String("fd00::1"), Port: common.Int(80)},
		{IpAddress: common.String("10.0.0.1"), Port: common.Int(80), MaxConnections: common.Int(10)},
	} {
		err := emu.SeedState(ociemu.Seed{LoadBalancers: []loadbalancer.LoadBalancer{{Id: common.String("ocid1.loadbalancer.oc1.iad.bad"),
			BackendSets: map[string]loadbalancer.BackendSet{"s": {Policy: common.String("ROUND_ROBIN"), HealthChecker: hc, Backends: []loadbalancer.Backend{be}}}}}})
		if err == nil {
			t.Errorf("a seed with backend %s was taken", be)
		}
	}
}

// OCI's documented backend limits: 512 per backend set on both services,
// 512 per classic load balancer and 1024 per NLB in all, and two in a
// non-preemptive NLB backend set, whose backends cannot be edited one by
// one. A write past one is 400 LimitExceeded.
func TestDocumentedBackendLimits(t *testing.T) {
	f := newFixture(t, ociemu.Options{}, false)
	const classicLB, nlb = "ocid1.loadbalancer.oc1.iad.limits", "ocid1.networkloadbalancer.oc1.iad.limits"
	nlbSet := func(n int, nonPreemptive bool) networkloadbalancer.BackendSet {
		s := networkloadbalancer.BackendSet{IsPreserveSource: common.Bool(false), HealthChecker: &networkloadbalancer.HealthChecker{Protocol: networkloadbalancer.HealthCheckProtocolsTcp},
			AreOperationallyActiveBackendsPreferred: common.Bool(nonPreemptive)}
		for i := range n {
			s.Backends = append(s.Backends, networkloadbalancer.Backend{IpAddress: common.String(addressOf(i)), Port: common.Int(80)})
		}
		return s
	}
	classicSet := func(n int) loadbalancer.BackendSet {
		s := loadbalancer.BackendSet{Policy: common.String("ROUND_ROBIN"), HealthChecker: &loadbalancer.HealthChecker{Protocol: common.String("TCP")}}
		for i := range n {
			s.Backends = append(s.Backends, loadbalancer.Backend{IpAddress: common.String(addressOf(i)), Port: common.Int(80)})
		}
		return s
	}
	must(t, f.emu.SeedState(ociemu.Seed{
		LoadBalancers: []loadbalancer.LoadBalancer{{Id: common.String(classicLB),
			BackendSets: map[string]loadbalancer.BackendSet{"a": classicSet(0), "b": classicSet(500)}}},
		NetworkLoadBalancers: []networkloadbalancer.NetworkLoadBalancer{{Id: common.String(nlb),
			BackendSets: map[string]networkloadbalancer.BackendSet{"a": nlbSet(0, false), "b": nlbSet(512, false), "c": nlbSet(500, false), "pair": nlbSet(2, true)}}},
	}))

	classicWrite := func(set string, n int) error {
		s := classicSet(n)
		d := loadbalancer.UpdateBackendSetDetails{Policy: s.Policy, HealthChecker: &loadbalancer.HealthCheckerDetails{Protocol: common.String("TCP")}, Backends: []loadbalancer.BackendDetails{}}
		for _, be := range s.Backends {
			d.Backends = append(d.Backends, loadbalancer.BackendDetails{IpAddress: be.IpAddress, Port: be.Port})
		}
		resp, err := f.lb.UpdateBackendSet(f.context, loadbalancer.UpdateBackendSetRequest{LoadBalancerId: common.String(classicLB), BackendSetName: common.String(set), UpdateBackendSetDetails: d})
		if err == nil {
			f.waitClassic(t, *resp.OpcWorkRequestId)
		}
		return err
	}
	networkWrite := func(set string, n int, nonPreemptive bool) error {
		d := networkloadbalancer.UpdateBackendSetDetails{IsPreserveSource: common.Bool(false), HealthChecker: &networkloadbalancer.HealthCheckerDetails{Protocol: networkloadbalancer.HealthCheckProtocolsTcp},
			AreOperationallyActiveBackendsPreferred: common.Bool(nonPreemptive), Backends: []networkloadbalancer.BackendDetails{}}
		for _, be := range nlbSet(n, false).Backends {
			d.Backends = append(d.Backends, networkloadbalancer.BackendDetails{IpAddress: be.IpAddress, Port: be.Port})
		}
		resp, err := f.nlb.UpdateBackendSet(f.context, networkloadbalancer.UpdateBackendSetRequest{NetworkLoadBalancerId: common.String(nlb), BackendSetName: common.String(set), UpdateBackendSetDetails: d})
		if err == nil {
			f.waitNetwork(t, *resp.OpcWorkRequestId)
		}
		return err
	}

	// Classic: 512 in all, so a may have at most 12 beside b's 500.
	serviceError(t, classicWrite("a", 13), 400, "LimitExceeded")
	must(t, classicWrite("a", 12))
	must(t, classicWrite("b", 0))
	serviceError(t, classicWrite("a", 513), 400, "LimitExceeded")
	must(t, classicWrite("a", 512))
	_, err := f.lb.CreateBackend(f.context, loadbalancer.CreateBackendRequest{LoadBalancerId: common.String(classicLB), BackendSetName: common.String("b"),
		CreateBackendDetails: loadbalancer.CreateBackendDetails{IpAddress: common.String("10.1.0.1"), Port: common.Int(80)}})
	serviceError(t, err, 400, "LimitExceeded")

	// NLB: 512 per set, 1024 in all (b 512, c 500, pair 2: a may have 10).
	serviceError(t, networkWrite("b", 513, false), 400, "LimitExceeded")
	serviceError(t, networkWrite("a", 11, false), 400, "LimitExceeded")
	must(t, networkWrite("a", 10, false))
	serviceError(t, networkWrite("pair", 3, true), 400, "LimitExceeded")
	serviceError(t, networkWrite("c", 3, true), 400, "LimitExceeded") // c made non-preemptive
	must(t, networkWrite("c", 2, true))
	_, err = f.nlb.UpdateBackend(f.context, networkloadbalancer.UpdateBackendRequest{NetworkLoadBalancerId: common.String(nlb), BackendSetName: common.String("pair"),
		BackendName: common.String("10.2.0.1:80"), UpdateBackendDetails: networkloadbalancer.UpdateBackendDetails{IsDrain: common.Bool(true)}})
	if se := serviceError(t, err, 400, "InvalidParameter"); !strings.Contains(se.GetMessage(), "non-preemptive") {
		t.Errorf("editing a backend of a non-preemptive set: %v", se)
	}
}

func addressOf(i int) string { return fmt.Sprintf("10.2.%d.%d", i/250, 1+i%250) }
