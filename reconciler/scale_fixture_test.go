package reconciler_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/time/rate"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/peppy-ratio/lbregistrar/api/v1beta1"
	"github.com/peppy-ratio/lbregistrar/reconciler"
	"github.com/peppy-ratio/lbregistrar/reconciler/metrics"
	"github.com/peppy-ratio/lbregistrar/test/eventually"
	"github.com/peppy-ratio/lbregistrar/test/kube"
	"github.com/peppy-ratio/lbregistrar/test/ociemu"
	"github.com/peppy-ratio/lbregistrar/test/scale"
)

// scaleFixture is a fixture whose managers' status writes are counted.
type scaleFixture struct {
	*fixture
	statusWrites scale.StatusWrites
}

// newScaleFixture is a fixture on the API server cfg reaches, with time
// enough for BenchmarkScale's cases.
func newScaleFixture(b *testing.B, cfg *rest.Config, api client.Client) *scaleFixture {
	b.Helper()
	f := &scaleFixture{fixture: newFixtureOn(b, ociemu.Options{WorkRequestLatency: scaleLatency}, cfg, api)}
	f.cfg = f.statusWrites.Wrap(cfg)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	b.Cleanup(cancel)
	f.ctx = ctx
	return f
}

// setUpScale seeds lbs load balancers whose backend sets list every node of
// the scale cluster, starts the controller (on the fixture's configuration,
// which reaches the scale cluster), creates a resource for each, and waits
// until it has adopted them all; stop stops the controller, and may fail
// to in time when the API server is swamped.
func setUpScale(b *testing.B, lbs int) (f *scaleFixture, ids []string, stop func()) {
	b.Helper()
	cluster := populatedScaleCluster(b, scaleNodes)
	f = newScaleFixture(b, cluster.Config, cluster.Client)
	f.cleanupNodes = []client.DeleteAllOfOption{client.HasLabels{scaleAddedLabel}}
	ips := scalePool()
	nodes := len(ips)
	// Without one node of the pool, which the adoption writes: a
	// controller that has run a while knows how long work requests take,
	// and polls them so (the estimator of reconciler/oci).
	ids = f.seedBalancers("scale", lbs, scaleSets, everyOtherLB, ips[1:])
	// It may fail to stop in time when node-added gives up.
	mgr, stop := f.startManagerOn(f.cfg, true, f.scaleOptions(1000, 1000))
	adopting := time.Now()
	// A few resources at a time, as many adoptions at once once took the
	// API server longer than the controller's status write timeout.
	for first := 0; first < lbs; first += scaleAdoptBatch {
		for i := first; i < min(first+scaleAdoptBatch, lbs); i++ {
			f.registrar(fmt.Sprintf("scale-%d", i), ids[i], benchTargets(scaleSets), func(o *v1beta1.LBRegistrar) {
				o.Spec.NodeSelector = &metav1.LabelSelector{MatchLabels: map[string]string{scale.PoolLabel: scale.Pool(0)}}
			})
		}
		eventually.Passes(b, 5*time.Minute, 100*time.Millisecond, func() error {
			var list v1beta1.LBRegistrarList // read in place from the cache
			f.must(mgr.GetClient().List(f.ctx, &list, client.UnsafeDisableDeepCopy))
			adopted := 0
			for _, o := range list.Items {
				if len(o.Status.BackendSets) == scaleSets && !slices.ContainsFunc(o.Status.BackendSets, func(rec v1beta1.BackendSetStatus) bool {
					return rec.OwnedCount() != nodes
				}) {
					adopted++
				}
			}
			if adopted < min(first+scaleAdoptBatch, lbs) {
				return fmt.Errorf("%d of %d resources record the %d backends of each of their backend sets", adopted, len(list.Items), nodes)
			}
			return nil
		})
		f.awaitQuiet()
	}
	b.Logf("%d resources adopted %d backend sets of %d backends in %s", lbs, lbs*scaleSets, nodes, time.Since(adopting).Round(time.Second))
	return f, ids, stop
}

// scalePool are the addresses of the scale cluster's nodes in pool 0, the
// nodes every resource of node-added and steady-state registers.
func scalePool() []string {
	var ips []string
	for i := 0; i < scaleNodes; i += scale.NodePools {
		ips = append(ips, scale.NodeIP(i))
	}
	return ips
}

// scaleOptions are the fixture's options with work request polls from
// 100 ms to serve's default 10 s, serve's default write backoff, and OCI
// calls paced at limit per second, with burst.
func (f *fixture) scaleOptions(limit float64, burst int) reconciler.Options {
	o := f.options()
	d := reconciler.DefaultOptions()
	o.OCI.PollMin, o.OCI.PollMax = 100*time.Millisecond, d.OCI.PollMax
	o.OCI.RateLimit, o.OCI.Burst = rate.Limit(limit), burst
	o.Backoff = d.Backoff
	// The benchmarks count the calls of reconciles; the watch's are its
	// listings, one or two per load balancer and period (docs/reconciler.md).
	o.WatchPeriod = 0
	return o
}

// awaitWritten waits until every backend set of lbs has a work request
// accepted since since that succeeded, and returns when the last of them
// finished and, per load balancer, when its last one did; or, once giveUp
// (if any) returns an error, that error.
func (f *fixture) awaitWritten(lbs []string, sets int, since time.Time, giveUp func() error) (time.Time, map[string]time.Time, error) {
	f.t.Helper()
	wanted := map[string]bool{}
	for _, lb := range lbs {
		for s := range sets {
			wanted[lb+"/"+benchSet(s)] = true
		}
	}
	finished := map[string]time.Time{} // the first success of each backend set
	deadline := time.Now().Add(5 * time.Minute)
	for len(finished) < len(wanted) {
		if giveUp != nil {
			if err := giveUp(); err != nil {
				return time.Time{}, nil, err
			}
		}
		if time.Now().After(deadline) {
			return time.Time{}, nil, fmt.Errorf("%d of %d backend sets written after 5 minutes", len(finished), len(wanted))
		}
		time.Sleep(20 * time.Millisecond)
		for _, wr := range f.emu.WorkRequests() {
			key := wr.LoadBalancerID + "/" + wr.BackendSet
			if !wanted[key] || wr.Status != ociemu.StateSucceeded || wr.TimeAccepted.Before(since) {
				continue
			}
			if at, ok := finished[key]; !ok || wr.TimeFinished.Before(at) {
				finished[key] = wr.TimeFinished
			}
		}
	}
	var last time.Time
	perLB := map[string]time.Time{}
	for key, at := range finished {
		lb, _, _ := strings.Cut(key, "/")
		if at.After(perLB[lb]) {
			perLB[lb] = at
		}
		if at.After(last) {
			last = at
		}
	}
	return last, perLB, nil
}

// awaitQuiet waits until no flight is in the air and OCI has not been
// called for half a second.
func (f *fixture) awaitQuiet() {
	f.t.Helper()
	last, since := -1, time.Now()
	eventually.Passes(f.t, 5*time.Minute, 20*time.Millisecond, func() error {
		if n := f.emu.Counters().Requests; n != last || counter(f.t, metrics.Flights) != 0 {
			last, since = n, time.Now()
			return errors.New("the controller is still calling OCI")
		}
		if time.Since(since) < 500*time.Millisecond {
			return errors.New("the controller called OCI less than half a second ago")
		}
		return nil
	})
}

// callLog is the emulator's call log since it was last reset, whole:
// the emulator drops the oldest entries only at 10,000.
func (f *fixture) callLog() []ociemu.Call {
	f.t.Helper()
	calls := f.emu.Calls()
	if n := f.emu.Counters().Requests; n >= 10000 {
		f.t.Fatalf("%d calls since the call log was reset: it no longer has them all", n)
	}
	return calls
}

// discard stops the fixture's managers and deletes every LBRegistrar and
// the nodes cleanup deletes, without deregistering anything: the backends
// are in the fixture's emulator, which goes with it.
func (f *fixture) discard() {
	f.t.Helper()
	for _, stop := range slices.Backward(f.stop) {
		stop()
	}
	var list metav1.PartialObjectMetadataList
	list.SetGroupVersionKind(v1beta1.GroupVersion.WithKind("LBRegistrarList"))
	f.must(f.api.List(f.ctx, &list))
	for i := range list.Items {
		o := &list.Items[i]
		if len(o.Finalizers) > 0 {
			f.must(client.IgnoreNotFound(f.api.Patch(f.ctx, o, client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`)))))
		}
		f.must(client.IgnoreNotFound(f.api.Delete(f.ctx, o)))
	}
	f.must(f.api.DeleteAllOf(f.ctx, &corev1.Node{}, f.cleanupNodes...))
}

var (
	scaleClusterOnce  sync.Once
	scaleCluster      *kube.Cluster // stopped by TestMain
	scaleClusterNodes int           // the nodes it has
	scaleClusterErr   error
)

// populatedScaleCluster is an API server of its own, with the LBRegistrar
// CRD and nodes nodes, filled once for as long as cases ask for as many
// nodes, since that takes a while, and so that they stay out of the
// package's other tests.
func populatedScaleCluster(b *testing.B, nodes int) *kube.Cluster {
	b.Helper()
	skipWithoutAPIServer(b)
	if scaleCluster != nil && scaleClusterNodes != nodes {
		replaceScaleCluster()
	}
	scaleClusterOnce.Do(func() {
		scaleClusterNodes = nodes
		ctx := context.Background()
		if scaleCluster, scaleClusterErr = startPlainCluster(false); scaleClusterErr != nil {
			return
		}
		var pid int
		if pid, scaleClusterErr = scale.APIServerPID(scaleCluster.Config); scaleClusterErr != nil {
			return
		}
		go scale.GuardAPIServer(pid, scaleAPIServerKillMiB)
		scaleClusterErr = scale.Create(ctx, scaleCluster.Config, scale.Nodes(nodes))
	})
	if scaleClusterErr != nil {
		b.Fatal(scaleClusterErr)
	}
	return scaleCluster
}

// dropScale ends a case of the scale cluster: with a few resources, it
// discards them; with more, whose records of 5,000 backends would cost the
// API server more to delete than a new one costs to fill, or when the API
// server is swamped, it stops the API server, killing it first, so that
// the controller's status writes fail at once and it stops soon, and a new
// one serves whatever runs next.
func (f *scaleFixture) dropScale(lbs int) {
	f.t.Helper()
	if lbs <= scaleAdoptBatch {
		f.discard()
		return
	}
	replaceScaleCluster()
	for _, stop := range slices.Backward(f.stop) {
		stop()
	}
}

// replaceScaleCluster stops the scale API server, killing it first, so
// that the next populatedScaleCluster starts and fills a new one.
func replaceScaleCluster() {
	if pid, err := scale.APIServerPID(scaleCluster.Config); err == nil {
		if p, err := os.FindProcess(pid); err == nil {
			_ = p.Kill()
		}
	}
	_ = scaleCluster.Stop() // it complains of the API server it no longer finds
	scaleCluster, scaleClusterErr, scaleClusterOnce = nil, nil, sync.Once{}
}
