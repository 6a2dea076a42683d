package reconciler

import (
	"context"

	"github.com/oracle/oci-go-sdk/v65/common"
	"golang.org/x/time/rate"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/labels"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/peppy-ratio/lbregistrar/api/v1beta1"
	"github.com/peppy-ratio/lbregistrar/reconciler/backendset"
	"github.com/peppy-ratio/lbregistrar/reconciler/credentials"
	"github.com/peppy-ratio/lbregistrar/reconciler/debugview"
	"github.com/peppy-ratio/lbregistrar/reconciler/desired"
	"github.com/peppy-ratio/lbregistrar/reconciler/eventnote"
	"github.com/peppy-ratio/lbregistrar/reconciler/gates"
	"github.com/peppy-ratio/lbregistrar/reconciler/lanes"
	"github.com/peppy-ratio/lbregistrar/reconciler/lbwatch"
	"github.com/peppy-ratio/lbregistrar/reconciler/nodeviews"
	"github.com/peppy-ratio/lbregistrar/reconciler/oci"
	"github.com/peppy-ratio/lbregistrar/reconciler/ownership"
	"github.com/peppy-ratio/lbregistrar/reconciler/plan"
	"github.com/peppy-ratio/lbregistrar/reconciler/preview"
	"github.com/peppy-ratio/lbregistrar/reconciler/readiness"
	"github.com/peppy-ratio/lbregistrar/reconciler/status"
)

// Finalizer keeps a resource until its own backends are deregistered.
const Finalizer = "nodes.peppy-ratio.dev/deregister"

// Reconciler reconciles LBRegistrar (v1beta1, the hub).
type Reconciler struct {
	client    client.Client // the cache, through nodes
	nodes     *nodeviews.Views
	apiReader client.Reader // uncached reads
	secrets   *credentials.Secrets
	events    events.EventRecorder
	builders  credentials.Builders[ociAPI]
	lanes     *lanes.Lanes
	wakeups   *lanes.Wakeups
	watch     *lbwatch.Watch // notices other writers' changes
	flights   *lanes.Flights
	pending   *preview.Pending    // kept back by DryRun
	refusals  backendset.Refusals // additions OCI refused, kept back until their retry
	waiters   backendset.Waiters  // backend sets whose additions a load balancer's limit withholds
	drains    debugview.Drains
	seen      readiness.Store // what the reconciles found, for the readiness gates
	gates     *gates.Controller
	status    *status.Writers
	keys      *ownership.KeyStore
	elected   <-chan struct{} // closed once this replica leads
	opts      Options
}

// SetupWithManager registers the reconciler, its indexes and watches, and
// serves the debug view (debugview.Path) on the manager's metrics server
// (so it has that server's address and access rules, and is off when metrics
// are off). The
// controller runs only on the elected leader; webhooks on the same manager
// keep serving on every replica. It reads claims through the index
// index.Add registers on the manager.
func SetupWithManager(ctx context.Context, mgr ctrl.Manager, o Options) error {
	factory, err := o.ociFactory()
	if err != nil {
		return err
	}
	workloadIdentity, err := o.workloadIdentity(mgr.GetConfig(), mgr.GetClient())
	if err != nil {
		return err
	}
	wakeups := &lanes.Wakeups{}
	// Noticing other writers' changes gets a quarter of the OCI rate limit,
	// so writes keep the rest however many load balancers are watched.
	watch := lbwatch.New(o.WatchPeriod, factory.RateLimit()/4, wakeups.Wake)
	events := eventnote.Recorder{EventRecorder: mgr.GetEventRecorder("lbregistrar")}
	records := &ownership.KeyStore{Reader: mgr.GetAPIReader(), Writer: mgr.GetClient(), Secret: o.RecordKey}
	nodes := nodeviews.New(mgr.GetClient())
	r := &Reconciler{
		client:    nodes,
		nodes:     nodes,
		apiReader: mgr.GetAPIReader(),
		secrets:   credentials.NewSecrets(mgr.GetAPIReader(), o.SecretNamespaces),
		events:    events,
		builders: o.builders(
			func(c oci.Credentials) (ociAPI, error) {
				ociClient, err := factory.Client(c)
				if err != nil {
					return nil, err
				}
				return ownedBy{ociClient, watch}, nil
			},
			func(identity, region string, newProvider func() (common.ConfigurationProvider, error)) (ociAPI, error) {
				ociClient, err := factory.SessionClient(identity, region, newProvider)
				if err != nil {
					return nil, err
				}
				return ownedBy{ociClient, watch}, nil
			},
			workloadIdentity),
		lanes:   lanes.New(),
		wakeups: wakeups,
		watch:   watch,
		flights: lanes.NewFlights(wakeups.After),
		pending: preview.NewPending(),
		keys:    records,
		// As many status writes at once as reconcile workers.
		status:  status.NewWriters(mgr.GetClient(), mgr.GetAPIReader(), events, records, max(o.Workers, 1)),
		elected: mgr.Elected(),
		opts:    o,
	}
	r.gates = &gates.Controller{Client: nodes, Events: events, Seen: &r.seen, Registrars: wakeups, DryRun: o.DryRun, BackendHealth: o.BackendHealth, Workers: o.Workers}
	return r.setup(ctx, mgr)
}

func (r *Reconciler) setup(ctx context.Context, mgr ctrl.Manager) error {
	if err := mgr.GetFieldIndexer().IndexField(ctx, &v1beta1.LBRegistrar{}, secretIndex, indexSecrets); err != nil {
		return err
	}

	if err := mgr.Add(r.flights); err != nil {
		return err
	}
	if err := mgr.Add(r.watch); err != nil {
		return err
	}
	view := debugview.Sources{Lanes: r.lanes, Drains: &r.drains, Elected: r.elected}
	if r.opts.DryRun {
		view.Pending = r.pending
	}
	if err := mgr.AddMetricsServerExtraHandler(debugview.Path, debugview.Handler(view)); err != nil {
		return err
	}
	secretEvents, err := r.secretSource(mgr)
	if err != nil {
		return err
	}
	if err := r.gates.SetupWithManager(mgr); err != nil {
		return err
	}
	batches := newBatches(r.opts.EndpointBatchPeriod, r.opts.EndpointBatchQuiet, clock.RealClock{})
	return ctrl.NewControllerManagedBy(mgr).
		Named("lbregistrar").
		For(&v1beta1.LBRegistrar{}, builder.WithPredicates(predicate.Or[client.Object](
			predicate.GenerationChangedPredicate{}, predicate.AnnotationChangedPredicate{}, deletionStarted()))).
		Watches(&v1beta1.LBRegistrar{}, handler.EnqueueRequestsFromMapFunc(r.claimSiblings),
			builder.WithPredicates(predicate.Or[client.Object](
				predicate.GenerationChangedPredicate{}, predicate.AnnotationChangedPredicate{}, deletionStarted()))).
		Watches(&corev1.Node{}, handler.EnqueueRequestsFromMapFunc(r.nodeEvent),
			builder.WithPredicates(nodeChanged())).
		Watches(&corev1.Service{}, handler.EnqueueRequestsFromMapFunc(r.byService),
			builder.WithPredicates(serviceSpecChanged())).
		Watches(&discoveryv1.EndpointSlice{}, batches.handler(handler.EnqueueRequestsFromMapFunc(r.byEndpointSlice)),
			builder.WithPredicates(r.endpointsChanged())).
		Watches(&corev1.Pod{}, batches.handler(handler.EnqueueRequestsFromMapFunc(r.gates.ByGatedPod)), builder.WithPredicates(gates.GatedPodChanged())).
		WatchesRawSource(secretEvents).
		WatchesRawSource(r.wakeups).
		WithOptions(controller.Options{
			MaxConcurrentReconciles: r.opts.Workers,
			RateLimiter: workqueue.NewTypedMaxOfRateLimiter(
				workqueue.NewTypedItemExponentialFailureRateLimiter[reconcile.Request](lanes.FailureBackoffBase, lanes.FailureBackoffMax),
				&workqueue.TypedBucketRateLimiter[reconcile.Request]{Limiter: rate.NewLimiter(20, 200)},
			),
		}).
		Complete(r)
}

// ownedBy tells the watch of each write this process makes, so that its end
// is not taken for another writer's change.
type ownedBy struct {
	*oci.Client
	watch *lbwatch.Watch
}

func (o ownedBy) UpdateBackendSet(ctx context.Context, bs *oci.BackendSet, backends []plan.Backend, failed string) (string, error) {
	id, err := o.Client.UpdateBackendSet(ctx, bs, backends, failed)
	if err == nil {
		o.watch.Own(bs.LoadBalancerID, id)
	}
	return id, err
}

// CacheOptions are the manager's cache options: the nodes, Services and
// EndpointSlices the controller watches are cached with only what the
// desired state reads (desired.TrimNode and friends), and every other
// object without its managed fields, so memory follows the size of the
// cluster's topology rather than of its objects (a node's images and
// conditions, kubectl's last-applied annotations).
func CacheOptions() cache.Options {
	return cache.Options{
		DefaultTransform: cache.TransformStripManagedFields(),
		ByObject: map[client.Object]cache.ByObject{
			&corev1.Node{}:               {Transform: trimming(desired.TrimNode)},
			&corev1.Service{}:            {Transform: trimming(desired.TrimService)},
			&discoveryv1.EndpointSlice{}: {Transform: trimming(desired.TrimEndpointSlice)},
			// Only the pods that carry lbregistrar's readiness gate, which
			// its admission policy keeps to namespaces that opted in.
			&corev1.Pod{}: {Label: gatedPods, Transform: trimming(desired.TrimPod)},
		},
	}
}

// gatedPods selects the pods the admission webhook gave the readiness gate:
// only pods of namespaces that opted in may carry its label
// (config/webhook/policy.yaml), so no other namespace's pods are listed.
var gatedPods = labels.SelectorFromSet(labels.Set{v1beta1.ReadinessGateLabel: ""})

// trimming applies trim to the objects of its type; anything else (a
// deletion tombstone) passes unchanged.
func trimming[T any](trim func(T) T) toolscache.TransformFunc {
	return func(in any) (any, error) {
		if obj, ok := in.(T); ok {
			return trim(obj), nil
		}
		return in, nil
	}
}
