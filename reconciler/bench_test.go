package reconciler_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/oracle/oci-go-sdk/v65/common"
	"github.com/oracle/oci-go-sdk/v65/loadbalancer"
	"github.com/oracle/oci-go-sdk/v65/networkloadbalancer"
	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/peppy-ratio/lbregistrar/api/v1beta1"
	"github.com/peppy-ratio/lbregistrar/reconciler"
	"github.com/peppy-ratio/lbregistrar/reconciler/oci"
	"github.com/peppy-ratio/lbregistrar/test/eventually"
	"github.com/peppy-ratio/lbregistrar/test/ociemu"
)

// seedBench adds lbs classic load balancers with sets empty backend sets each.
func (f *fixture) seedBench(lbs, sets int) []string {
	f.t.Helper()
	return f.seedBalancers("bench", lbs, sets, classicOnly, nil)
}

// Which of the load balancers seedBalancers adds are network load balancers.
var (
	classicOnly  = func(int) bool { return false }
	networkOnly  = func(int) bool { return true }
	everyOtherLB = func(l int) bool { return l%2 == 1 }
)

// benchSet is the name of the s-th backend set seedBalancers gives a load
// balancer; benchTargets registers node port 31000+s into it.
func benchSet(s int) string { return fmt.Sprintf("bs-%d", s) }

// benchTargets are fixed ports 31000, 31001, ... into backend sets bs-0,
// bs-1, ..., one per backend set.
func benchTargets(sets int) []v1beta1.Target {
	var targets []v1beta1.Target
	for s := range sets {
		targets = append(targets, fixedPort(benchSet(s), int32(31000+s)))
	}
	return targets
}

// seedBalancers adds lbs load balancers, named after name, with sets backend
// sets each (benchSet) checked by TCP every 10 s; those network says are
// network load balancers (not preserving the source, so nodes go in by
// address). Each backend set has a backend of weight 1 for every IP in
// ips, at the node port benchTargets gives it.
func (f *fixture) seedBalancers(name string, lbs, sets int, network func(l int) bool, ips []string) []string {
	f.t.Helper()
	var seed ociemu.Seed
	var ids []string
	for l := range lbs {
		network := network(l)
		kind := "loadbalancer"
		if network {
			kind = "networkloadbalancer"
		}
		id := fmt.Sprintf("ocid1.%s.oc1.iad.%s-%s-%d", kind, f.ns, name, l)
		ids = append(ids, id)
		classic := loadbalancer.LoadBalancer{Id: common.String(id), BackendSets: map[string]loadbalancer.BackendSet{}}
		nlb := networkloadbalancer.NetworkLoadBalancer{Id: common.String(id), BackendSets: map[string]networkloadbalancer.BackendSet{}}
		for s := range sets {
			port, weight := common.Int(31000+s), common.Int(1)
			classicBackends, nlbBackends := []loadbalancer.Backend{}, []networkloadbalancer.Backend{}
			for _, ip := range ips {
				if network {
					nlbBackends = append(nlbBackends, networkloadbalancer.Backend{IpAddress: common.String(ip), Port: port, Weight: weight})
				} else {
					classicBackends = append(classicBackends, loadbalancer.Backend{IpAddress: common.String(ip), Port: port, Weight: weight})
				}
			}
			classic.BackendSets[benchSet(s)] = loadbalancer.BackendSet{
				Name: common.String(benchSet(s)), Policy: common.String("ROUND_ROBIN"), Backends: classicBackends,
				HealthChecker: &loadbalancer.HealthChecker{Protocol: common.String("TCP"), Port: common.Int(443),
					ReturnCode: common.Int(200), ResponseBodyRegex: common.String(""), Retries: common.Int(3),
					TimeoutInMillis: common.Int(3000), IntervalInMillis: common.Int(10000)},
			}
			nlb.BackendSets[benchSet(s)] = networkloadbalancer.BackendSet{
				Policy: networkloadbalancer.NetworkLoadBalancingPolicyFiveTuple, IsPreserveSource: common.Bool(false),
				IpVersion: networkloadbalancer.IpVersionIpv4, Backends: nlbBackends,
				HealthChecker: &networkloadbalancer.HealthChecker{Protocol: networkloadbalancer.HealthCheckProtocolsTcp, Port: common.Int(443),
					Retries: common.Int(3), TimeoutInMillis: common.Int(3000), IntervalInMillis: common.Int(10000)},
			}
		}
		if network {
			seed.NetworkLoadBalancers = append(seed.NetworkLoadBalancers, nlb)
		} else {
			seed.LoadBalancers = append(seed.LoadBalancers, classic)
		}
	}
	f.must(f.emu.SeedState(seed))
	return ids
}

// registered reports whether ip is registered in every named backend set
// of every load balancer (want true) or in none of them (want false).
func (f *fixture) registered(lbs []string, sets int, ip string, want bool) bool {
	for _, lb := range lbs {
		for s := range sets {
			bs, err := f.emu.Backends(lb, benchSet(s))
			f.must(err)
			if slices.ContainsFunc(bs, func(b ociemu.Backend) bool { return b.IPAddress == ip }) != want {
				return false
			}
		}
	}
	return true
}

func (f *fixture) waitRegistered(lbs []string, sets int, ip string, want bool) {
	f.t.Helper()
	eventually.Passes(f.t, time.Minute, 2*time.Millisecond, func() error {
		if !f.registered(lbs, sets, ip, want) {
			return fmt.Errorf("backend sets not converged on %s (want present %v)", ip, want)
		}
		return nil
	})
}

func (f *fixture) writes(lbs []string) int {
	c := f.emu.Counters()
	n := 0
	for _, lb := range lbs {
		n += c.Writes[lb]
	}
	return n
}

// benchRegistrars starts the reconciler and one resource per load balancer,
// each registering a fixed port into every backend set, and waits for the
// first registration.
func (f *fixture) benchRegistrars(lbs []string, sets int, o reconciler.Options) {
	f.t.Helper()
	f.node(f.ns+"-base", "10.1.0.1")
	f.startManager(o)
	for i, lb := range lbs {
		f.registrar(fmt.Sprintf("bench-%d", i), lb, benchTargets(sets))
	}
	f.waitRegistered(lbs, sets, "10.1.0.1", true)
}

// BenchmarkConvergence measures the time from one node joining until every
// affected backend set has it registered.
// "one-classic-lb": S backend sets of one classic load balancer, whose one
// ETag moves with every write to any of its backend sets, must be written
// one after the other, so with work requests taking L = 100 ms the floor
// is S x L; x-floor is the measured time over it, and 412s counts the
// writes refused for a stale ETag.
// "many-lbs": K classic load balancers, one backend set each, are written
// in parallel, so the floor is L whatever K is.
// "nlbs": K network load balancers of 3 backend sets each, L = 1 s: each
// writes its sets one after the other (3 x L), all at once after a quiet
// spell (the rate limit's bucket full again) in a controller that has
// converged before (its work request estimate warm), with OCI calls
// paced, work requests polled and other writers watched for as serve does
// by default.
// oci-calls is every OCI call the emulator answered from the node's
// creation until the last backend set had it registered, per converge;
// reads, wr-polls, listings and health-reads are the GetBackendSet,
// GetWorkRequest, ListWorkRequests and GetBackendSetHealth among them (the
// health reads those load balancers make that are done already).
func BenchmarkConvergence(b *testing.B) {
	cases := []struct {
		name      string
		lbs, sets int
		network   bool
		latency   time.Duration
	}{
		{"one-classic-lb/baseline", 1, 1, false, 100 * time.Millisecond},
		{"one-classic-lb/4-backend-sets", 1, 4, false, 100 * time.Millisecond},
		{"one-classic-lb/8-backend-sets", 1, 8, false, 100 * time.Millisecond},
		{"many-lbs/baseline", 1, 1, false, 100 * time.Millisecond},
		{"many-lbs/4-load-balancers", 4, 1, false, 100 * time.Millisecond},
		{"many-lbs/8-load-balancers", 8, 1, false, 100 * time.Millisecond},
		{"nlbs/baseline", 1, 3, true, time.Second},
		{"nlbs/4-load-balancers", 4, 3, true, time.Second},
	}
	for _, tc := range cases {
		b.Run(tc.name, func(b *testing.B) {
			f := newFixture(b, ociemu.Options{WorkRequestLatency: tc.latency})
			kind := classicOnly
			if tc.network {
				kind = networkOnly
			}
			lbs := f.seedBalancers("bench", tc.lbs, tc.sets, kind, nil)
			o := f.options()
			if tc.network {
				// Paced and polled as serve is by default.
				def := oci.DefaultOptions()
				o.OCI.RateLimit, o.OCI.Burst, o.OCI.PollMin, o.OCI.PollMax = def.RateLimit, def.Burst, def.PollMin, def.PollMax
			}
			f.benchRegistrars(lbs, tc.sets, o)
			quiet := func() {}
			if tc.network {
				// As in a controller that has run a while: it knows how long
				// work requests take (one converge more, not timed), and
				// four load balancers change at once after a quiet spell,
				// the health reads that end each converge done and the
				// rate limit's bucket full again.
				f.node(f.ns+"-warm", "10.1.0.250")
				f.waitRegistered(lbs, tc.sets, "10.1.0.250", true)
				quiet = func() {
					f.awaitQuiet()
					time.Sleep(time.Duration(float64(o.OCI.Burst) / float64(o.OCI.RateLimit) * float64(time.Second)))
				}
			}
			writes, refused := f.writes(lbs), f.emu.Counters().PreconditionFailed
			calls := map[string]int{}
			n := 0
			var total time.Duration
			for b.Loop() {
				b.StopTimer()
				quiet()
				b.StartTimer()
				n++
				ip := fmt.Sprintf("10.1.%d.%d", n/250+1, n%250+1)
				start := time.Now()
				f.node(fmt.Sprintf("%s-n%d", f.ns, n), ip)
				f.waitRegistered(lbs, tc.sets, ip, true)
				end := time.Now()
				total += end.Sub(start)
				for _, c := range f.emu.Calls() {
					if !c.Time.Before(start) && !c.Time.After(end) {
						calls[""]++
						calls[c.Operation]++
					}
				}
			}
			floor := time.Duration(tc.sets) * tc.latency
			b.ReportMetric(float64(total)/float64(n)/float64(floor), "x-floor")
			b.ReportMetric(float64(f.writes(lbs)-writes)/float64(n*tc.lbs*tc.sets), "writes/backend-set")
			b.ReportMetric(float64(f.emu.Counters().PreconditionFailed-refused)/float64(n), "412s")
			b.ReportMetric(float64(calls[""])/float64(n), "oci-calls")
			b.ReportMetric(float64(calls["GetBackendSet"])/float64(n), "reads")
			b.ReportMetric(float64(calls["GetWorkRequest"])/float64(n), "wr-polls")
			b.ReportMetric(float64(calls["ListWorkRequests"])/float64(n), "listings")
			b.ReportMetric(float64(calls["GetBackendSetHealth"])/float64(n), "health-reads")
		})
	}
}

// BenchmarkNodeBurst sends a burst of node events (nodes leaving the
// exclusion label, patched eight at a time, as a node pool's kubelets and
// controllers write them) while the first resulting work request (L = 1 s)
// runs, and reports the writes it took per backend set (the goal is at
// most 2) and how long the burst took (burst-s; one longer than L is not
// within one work request: sent one node after another, it took about L,
// and 1 run in 6 wrote 3 times).
func BenchmarkNodeBurst(b *testing.B) {
	const latency = time.Second
	for _, tc := range []struct {
		name   string
		events int
	}{{"during-one-work-request/baseline", 1}, {"during-one-work-request/100-events", 100}} {
		b.Run(tc.name, func(b *testing.B) {
			f := newFixture(b, ociemu.Options{WorkRequestLatency: latency})
			lbs := f.seedBench(1, 1)
			excluded := func(n *corev1.Node) { n.Labels[corev1.LabelNodeExcludeBalancers] = "" }
			for i := range tc.events {
				f.node(fmt.Sprintf("%s-burst-%d", f.ns, i), fmt.Sprintf("10.2.%d.%d", i/250, i%250+1), excluded)
			}
			f.benchRegistrars(lbs, 1, f.options())
			last := fmt.Sprintf("10.2.%d.%d", (tc.events-1)/250, (tc.events-1)%250+1)
			var ops, writes int
			var burst time.Duration
			include := true
			for b.Loop() {
				before := f.writes(lbs)
				value := `""` // excluded
				if include {
					value = "null" // the label removed
				}
				label := `{"metadata":{"labels":{"` + corev1.LabelNodeExcludeBalancers + `":` + value + `}}}`
				start := time.Now()
				var g errgroup.Group
				g.SetLimit(8)
				for i := range tc.events {
					g.Go(func() error {
						n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-burst-%d", f.ns, i)}}
						return f.api.Patch(f.ctx, n, client.RawPatch(types.MergePatchType, []byte(label)))
					})
				}
				f.must(g.Wait())
				burst += time.Since(start)
				f.waitRegistered(lbs, 1, last, include)
				writes += f.writes(lbs) - before
				ops++
				include = !include
			}
			b.ReportMetric(float64(writes)/float64(ops), "writes/backend-set")
			b.ReportMetric(burst.Seconds()/float64(ops), "burst-s")
		})
	}
}

// BenchmarkNoChange reconciles a resource whose backend sets already have
// what they should; the goal is 0 writes.
func BenchmarkNoChange(b *testing.B) {
	b.Run("reconcile/baseline", func(b *testing.B) {
		f := newFixture(b, ociemu.Options{WorkRequestLatency: 10 * time.Millisecond})
		lbs := f.seedBench(1, 4)
		f.benchRegistrars(lbs, 4, f.options())
		var list v1beta1.LBRegistrarList
		f.must(f.api.List(f.ctx, &list))
		var obj *v1beta1.LBRegistrar
		for i := range list.Items {
			if list.Items[i].Spec.LoadBalancerID == lbs[0] {
				obj = &list.Items[i]
			}
		}
		writes := f.writes(lbs)
		n := 0
		for b.Loop() {
			n++
			reads := f.emu.Counters().Requests
			f.updateRegistrar(obj, func(o *v1beta1.LBRegistrar) { o.Annotations = map[string]string{"touch": fmt.Sprint(n)} })
			// One reconcile reads the four backend sets.
			eventually.Passes(b, time.Minute, time.Millisecond, func() error {
				if n := f.emu.Counters().Requests - reads; n < 4 {
					return fmt.Errorf("%d of the 4 backend sets read", n)
				}
				return nil
			})
		}
		b.ReportMetric(float64(f.writes(lbs)-writes)/float64(n), "writes/reconcile")
	})
}
