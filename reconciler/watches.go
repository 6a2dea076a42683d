package reconciler

import (
	"context"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/peppy-ratio/lbregistrar/api/v1beta1"
	"github.com/peppy-ratio/lbregistrar/api/validation"
	"github.com/peppy-ratio/lbregistrar/index"
	"github.com/peppy-ratio/lbregistrar/reconciler/decide"
	"github.com/peppy-ratio/lbregistrar/reconciler/desired"
	"github.com/peppy-ratio/lbregistrar/reconciler/metrics"
)

// secretIndex is a field index over LBRegistrar, from a Secret to the
// resources that read it (index.ServiceField is the Services').
const secretIndex = "reconciler.spec.apiKey.secrets"

// secretSource watches the metadata of Secrets (never their data) in the
// namespaces API keys may live in, through a cache of its own when those are
// not every namespace; the same cache tells credentials.Secrets when a Secret
// changed, so an unchanged one is not read again.
func (r *Reconciler) secretSource(mgr ctrl.Manager) (source.Source, error) {
	meta := &metav1.PartialObjectMetadata{}
	meta.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Secret"))
	c := mgr.GetCache()
	if len(r.opts.SecretNamespaces) > 0 {
		namespaces := map[string]cache.Config{}
		for _, ns := range r.opts.SecretNamespaces {
			namespaces[ns] = cache.Config{}
		}
		own, err := cache.New(mgr.GetConfig(), cache.Options{
			Scheme: mgr.GetScheme(), Mapper: mgr.GetRESTMapper(), HTTPClient: mgr.GetHTTPClient(), DefaultNamespaces: namespaces,
		})
		if err != nil {
			return nil, err
		}
		if err := mgr.Add(own); err != nil {
			return nil, err
		}
		c = own
	}
	r.secrets.Watch(c)
	return source.Kind[client.Object](c, meta, handler.EnqueueRequestsFromMapFunc(r.bySecret)), nil
}

func indexSecrets(obj client.Object) []string {
	lbr, ok := obj.(*v1beta1.LBRegistrar)
	if !ok {
		return nil
	}
	var keys []string
	for _, ref := range validation.SecretReferences(&lbr.Spec) {
		if key := ref.Namespace + "/" + ref.Name; !slices.Contains(keys, key) {
			keys = append(keys, key)
		}
	}
	return keys
}

// deletionStarted passes the update that sets deletionTimestamp.
func deletionStarted() predicate.Predicate {
	return predicate.Funcs{
		UpdateFunc: func(e event.UpdateEvent) bool {
			return e.ObjectOld.GetDeletionTimestamp().IsZero() && !e.ObjectNew.GetDeletionTimestamp().IsZero()
		},
	}
}

// nodeChanged passes node updates that can change a desired state; status
// heartbeats, which are most node updates, do not.
func nodeChanged() predicate.Predicate {
	return predicate.Funcs{
		UpdateFunc: func(e event.UpdateEvent) bool {
			old, okOld := e.ObjectOld.(*corev1.Node)
			cur, okCur := e.ObjectNew.(*corev1.Node)
			return !okOld || !okCur || desired.NodeChanged(old, cur)
		},
	}
}

// serviceSpecChanged passes Service updates that change its spec; Services
// have no generation, and status updates (load balancer ingress) do not matter.
func serviceSpecChanged() predicate.Predicate {
	return predicate.Funcs{
		UpdateFunc: func(e event.UpdateEvent) bool {
			old, okOld := e.ObjectOld.(*corev1.Service)
			cur, okCur := e.ObjectNew.(*corev1.Service)
			return !okOld || !okCur || !equality.Semantic.DeepEqual(old.Spec, cur.Spec)
		},
	}
}

// requests are the resources opts select, as reconcile requests. They are
// listed in place from the cache (read, never changed): a copy of each
// resource, whose status records every backend it registered, for every
// node event would cost ~20 ms at 100 resources of 3 x 5,000 backends, and
// a controller starting gets an event for each of 5,000 nodes.
func (r *Reconciler) requests(ctx context.Context, opts ...client.ListOption) []reconcile.Request {
	var list v1beta1.LBRegistrarList
	if err := r.client.List(ctx, &list, append(opts, client.UnsafeDisableDeepCopy)...); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "listing LBRegistrars for a watch event")
		return nil
	}
	reqs := make([]reconcile.Request, 0, len(list.Items))
	for i := range list.Items {
		reqs = append(reqs, reconcile.Request{NamespacedName: types.NamespacedName{Name: list.Items[i].Name}})
	}
	return reqs
}

// nodeEvent is every resource, for a node event the watch's predicate
// passed; the node views go stale first, so the reconciles see the change.
func (r *Reconciler) nodeEvent(ctx context.Context, _ client.Object) []reconcile.Request {
	r.nodes.Changed()
	return r.requests(ctx)
}

func (r *Reconciler) byService(ctx context.Context, obj client.Object) []reconcile.Request {
	return r.requests(ctx, client.MatchingFields{index.ServiceField: obj.GetNamespace() + "/" + obj.GetName()})
}

// byEndpointSlice maps a slice to the resources whose backends depend on
// the Service's endpoints: Pod targets, targets with filterByEndpoints, or
// any target of a Service with externalTrafficPolicy: Local. Slices change
// often; the others need not hear about it.
func (r *Reconciler) byEndpointSlice(ctx context.Context, obj client.Object) []reconcile.Request {
	name := obj.GetLabels()[discoveryv1.LabelServiceName]
	if name == "" {
		return nil
	}
	key := types.NamespacedName{Namespace: obj.GetNamespace(), Name: name}
	naming, err := index.Naming(ctx, r.client, key)
	if err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "listing LBRegistrars for an EndpointSlice event")
		return nil
	}
	var svc corev1.Service
	local := r.client.Get(ctx, key, &svc) == nil && svc.Spec.ExternalTrafficPolicy == corev1.ServiceExternalTrafficPolicyLocal
	var reqs []reconcile.Request
	for i := range naming {
		for _, t := range naming[i].Spec.Services {
			if t.Namespace == key.Namespace && t.Name == key.Name && (local || t.FilterByEndpoints || t.Pods()) {
				reqs = append(reqs, reconcile.Request{NamespacedName: types.NamespacedName{Name: naming[i].Name}})
				break
			}
		}
	}
	return reqs
}

// endpointsChanged passes the slice updates that can change a desired
// state (desired.EndpointsChanged), read with the gated pods the cache
// has and the Service's other slices: a gated pod's endpoint turning ready
// as its gate opens does not pass, while no other pod awaits its gate.
// That change asks for no write, and would open a batch moments
// before the changes the gate lets through (the Deployment's old pods
// terminating, its next pods starting), which would then miss its write.
func (r *Reconciler) endpointsChanged() predicate.Predicate {
	return predicate.Funcs{
		UpdateFunc: func(e event.UpdateEvent) bool {
			old, okOld := e.ObjectOld.(*discoveryv1.EndpointSlice)
			cur, okCur := e.ObjectNew.(*discoveryv1.EndpointSlice)
			if !okOld || !okCur {
				return true
			}
			ctx := context.Background()
			var gated desired.GatedPods
			for _, s := range []*discoveryv1.EndpointSlice{old, cur} {
				if err := decide.ReadGated(ctx, r.client, s, &gated); err != nil {
					return true
				}
			}
			// Most changes count on the two slices alone; the Service's
			// other slices, and their gated pods, are read only for one
			// that does not: every slice of every Service passes here.
			if desired.EndpointsChanged(old, cur, nil, gated) {
				return true
			}
			service := types.NamespacedName{Namespace: cur.Namespace, Name: cur.Labels[discoveryv1.LabelServiceName]}
			all, err := decide.EndpointSlicesOf(ctx, r.client, service)
			if err != nil {
				return true
			}
			others := slices.DeleteFunc(slices.Clone(all), func(s *discoveryv1.EndpointSlice) bool { return s.Name == cur.Name })
			for _, s := range others {
				if err := decide.ReadGated(ctx, r.client, s, &gated); err != nil {
					return true
				}
			}
			return desired.EndpointsChanged(old, cur, others, gated)
		},
	}
}

// batches holds the reconciles that endpoint changes ask for, so that a
// change is written with the changes that follow it. The EndpointSlice
// controller batches a Service's pod changes the same way
// (kube-controller-manager --endpointslice-updates-batch-period:
// pkg/controller/endpointslice addPod and updatePod queue the Service
// with AddAfter), from the first change for a fixed period. Here a batch
// also closes early, once its changes pause for quiet: a rollout's
// surge batch is its old pods terminating and its new pods starting over
// a fraction of a second, each published on its own, and without the wait
// the first would be written alone and the others would wait for its
// work request before their own (OCI runs one at a time per load
// balancer). A resource's batch opens with the change that finds it
// closed and is enqueued once the changes pause for quiet, or once period
// has passed since it opened, whichever comes first: a steady stream of
// changes cannot hold a write back longer than period.
type batches struct {
	period, quiet time.Duration
	clock         clock.WithDelayedExecution

	mu   sync.Mutex
	open map[reconcile.Request]*batch
}

// batch is one resource's open batch: when its first change came, when
// it is to close, and the timer that closes it then.
type batch struct {
	opened, closes time.Time
	timer          clock.Timer
}

// newBatches returns the batches of period and quiet; a quiet time of 0,
// or above period, closes each batch period after it opened.
func newBatches(period, quiet time.Duration, c clock.WithDelayedExecution) *batches {
	if quiet <= 0 || quiet > period {
		quiet = period
	}
	return &batches{period: period, quiet: quiet, clock: c, open: map[reconcile.Request]*batch{}}
}

// handler is h with the requests it enqueues held in their resource's
// batch; with no period, h as it is.
func (b *batches) handler(h handler.EventHandler) handler.EventHandler {
	if b.period <= 0 {
		return h
	}
	held := func(q workqueue.TypedRateLimitingInterface[reconcile.Request]) workqueue.TypedRateLimitingInterface[reconcile.Request] {
		return batchingQueue{q, b}
	}
	return handler.Funcs{
		CreateFunc: func(ctx context.Context, e event.CreateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			h.Create(ctx, e, held(q))
		},
		UpdateFunc: func(ctx context.Context, e event.UpdateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			h.Update(ctx, e, held(q))
		},
		DeleteFunc: func(ctx context.Context, e event.DeleteEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			h.Delete(ctx, e, held(q))
		},
		GenericFunc: func(ctx context.Context, e event.GenericEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			h.Generic(ctx, e, held(q))
		},
	}
}

// hold puts req in its open batch, which the change keeps open for quiet
// more (but no longer than period from its opening), or opens one.
func (b *batches) hold(q workqueue.TypedRateLimitingInterface[reconcile.Request], req reconcile.Request) {
	b.mu.Lock()
	defer b.mu.Unlock()
	now := b.clock.Now()
	if o := b.open[req]; o != nil {
		d := max(0, min(b.quiet, o.opened.Add(b.period).Sub(now)))
		o.closes = now.Add(d)
		o.timer.Reset(d)
		return
	}
	o := &batch{opened: now, closes: now.Add(b.quiet)}
	o.timer = b.clock.AfterFunc(b.quiet, func() { b.close(q, req, o) })
	b.open[req] = o
}

// close enqueues req, whose batch o ended. A timer reset just as it fired
// fires again, for a batch already closed: that does nothing. It reads no
// clock: a timer fires at the time it was set for, o.closes.
func (b *batches) close(q workqueue.TypedRateLimitingInterface[reconcile.Request], req reconcile.Request, o *batch) {
	b.mu.Lock()
	current := b.open[req] == o
	if current {
		delete(b.open, req)
	}
	held := o.closes.Sub(o.opened)
	b.mu.Unlock()
	if current {
		metrics.EndpointBatchDuration.Observe(held.Seconds())
		q.Add(req)
	}
}

// batchingQueue adds each request to its batch.
type batchingQueue struct {
	workqueue.TypedRateLimitingInterface[reconcile.Request]
	batches *batches
}

func (q batchingQueue) Add(req reconcile.Request) { q.batches.hold(q.TypedRateLimitingInterface, req) }

func (r *Reconciler) bySecret(ctx context.Context, obj client.Object) []reconcile.Request {
	return r.requests(ctx, client.MatchingFields{secretIndex: obj.GetNamespace() + "/" + obj.GetName()})
}

// claimSiblings maps a resource to the others claiming any of its backend
// sets: its creation, deletion or spec change can hand a claim over.
func (r *Reconciler) claimSiblings(ctx context.Context, obj client.Object) []reconcile.Request {
	lbr, ok := obj.(*v1beta1.LBRegistrar)
	if !ok {
		return nil
	}
	seen := map[string]bool{lbr.Name: true}
	var reqs []reconcile.Request
	for _, key := range validation.ClaimKeys(&lbr.Spec) {
		for _, req := range r.requests(ctx, client.MatchingFields{index.ClaimField: key}) {
			if !seen[req.Name] {
				seen[req.Name] = true
				reqs = append(reqs, req)
			}
		}
	}
	return reqs
}
