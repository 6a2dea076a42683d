package reconciler

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"time"

	"github.com/spf13/pflag"
	"golang.org/x/time/rate"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/peppy-ratio/lbregistrar/api/v1beta1"
	"github.com/peppy-ratio/lbregistrar/api/validation"
	"github.com/peppy-ratio/lbregistrar/claims"
	"github.com/peppy-ratio/lbregistrar/reconciler/desired"
	"github.com/peppy-ratio/lbregistrar/reconciler/oci"
)

// Options configure the reconciler.
type Options struct {
	OCI oci.Options
	// Workers bounds how many resources (and so load balancers) are
	// reconciled at once.
	Workers int
	// Resync is the period, jittered by up to 10%, at which every resource
	// is reconciled again to repair drift made outside the controller.
	Resync time.Duration
	// DrainPeriod is how long a deleted resource's backends stay drained
	// before they are removed.
	DrainPeriod time.Duration
	// CleanupTimeout is how long after deletion cleanup is retried before
	// the finalizer is removed anyway.
	CleanupTimeout time.Duration
	// WorkRequestTimeout bounds the wait for one work request.
	WorkRequestTimeout time.Duration
	// ShutdownWait is how long, once shutdown begins, a write OCI already
	// accepted is still waited for, so that its outcome is recorded in
	// status and the next leader does not write it again. It must leave
	// the manager's graceful shutdown time to record it (see
	// docs/operations.md, "Shutdown").
	ShutdownWait time.Duration
	// RequireReadyNodes registers only Ready nodes (see desired.Options).
	RequireReadyNodes bool
	Backoff           Backoff
	// SecretNamespaces are the namespaces API key Secrets are read from and
	// watched in; empty means every namespace (which needs cluster-wide
	// access to Secrets).
	SecretNamespaces []string
	// OCICAFile names a PEM bundle trusted for OCI endpoints besides the
	// system roots (private endpoints); ignored when OCI.HTTPClient is set.
	OCICAFile string
}

// DefaultOptions are the defaults the flags start from.
func DefaultOptions() Options {
	o := Options{
		OCI:                oci.DefaultOptions(),
		Workers:            8,
		Resync:             10 * time.Minute,
		DrainPeriod:        30 * time.Second,
		CleanupTimeout:     30 * time.Minute,
		WorkRequestTimeout: 10 * time.Minute,
		ShutdownWait:       85 * time.Second,
		Backoff:            Backoff{Base: 500 * time.Millisecond, Max: 30 * time.Second, Attempts: 8},
	}
	// In a cluster, API keys are read from the controller's own namespace
	// unless said otherwise; that is what the shipped RBAC allows.
	if ns := os.Getenv("POD_NAMESPACE"); ns != "" {
		o.SecretNamespaces = []string{ns}
	}
	return o
}

// BindFlags registers the reconciler's flags on fs, with o's values as defaults.
func (o *Options) BindFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.OCI.LoadBalancerEndpoint, "oci-loadbalancer-endpoint", o.OCI.LoadBalancerEndpoint,
		"Base URL of the OCI Load Balancer API, replacing the regional one (private or dedicated-region endpoints)")
	fs.StringVar(&o.OCI.NetworkLoadBalancerEndpoint, "oci-networkloadbalancer-endpoint", o.OCI.NetworkLoadBalancerEndpoint,
		"Base URL of the OCI Network Load Balancer API, replacing the regional one")
	fs.StringSliceVar(&o.SecretNamespaces, "secret-namespaces", o.SecretNamespaces,
		"Namespaces API key Secrets are read from (default: $POD_NAMESPACE when set); an empty value means every namespace")
	fs.StringVar(&o.OCICAFile, "oci-ca-file", o.OCICAFile, "PEM file of CA certificates trusted for the OCI endpoints, besides the system ones")
	fs.Var((*limitValue)(&o.OCI.RateLimit), "oci-rate-limit", "OCI API calls per second, across all load balancers")
	fs.IntVar(&o.OCI.Burst, "oci-burst", o.OCI.Burst, "OCI API calls allowed in a burst above --oci-rate-limit")
	fs.DurationVar(&o.OCI.PollMin, "work-request-poll-min", o.OCI.PollMin, "Shortest interval between work request polls")
	fs.DurationVar(&o.OCI.PollMax, "work-request-poll-max", o.OCI.PollMax, "Longest interval between work request polls")
	fs.IntVar(&o.Workers, "reconcile-workers", o.Workers, "LBRegistrars (and so load balancers) reconciled in parallel")
	fs.DurationVar(&o.Resync, "resync-period", o.Resync, "Period of the drift-repairing resync (jittered by up to 10%)")
	fs.DurationVar(&o.DrainPeriod, "drain-period", o.DrainPeriod, "How long a deleted LBRegistrar's backends are drained before removal")
	fs.DurationVar(&o.CleanupTimeout, "cleanup-timeout", o.CleanupTimeout, "How long deletion retries deregistering before it lets the resource go")
	fs.BoolVar(&o.RequireReadyNodes, "require-ready-nodes", o.RequireReadyNodes,
		"Register only Ready nodes (by default the load balancer health check decides; when no node is Ready the filter is dropped)")
	fs.DurationVar(&o.WorkRequestTimeout, "work-request-timeout", o.WorkRequestTimeout, "Longest wait for one OCI work request")
	fs.IntVar(&o.Backoff.Attempts, "write-attempts", o.Backoff.Attempts, "Attempts of one backend-set write within a reconcile")
}

// limitValue is a rate.Limit as a flag value.
type limitValue rate.Limit

func (l *limitValue) String() string { return strconv.FormatFloat(float64(*l), 'g', -1, 64) }
func (l *limitValue) Type() string   { return "float" }
func (l *limitValue) Set(s string) error {
	v, err := strconv.ParseFloat(s, 64)
	if err != nil || v <= 0 {
		return fmt.Errorf("want a positive number of calls per second, got %q", s)
	}
	*l = limitValue(v)
	return nil
}

// Field indexes over LBRegistrar, from what a watched object is called to
// the resources that read it.
const (
	serviceIndex = "reconciler.spec.services"
	secretIndex  = "reconciler.spec.apiKey.secrets"
)

// SetupWithManager registers the reconciler, its indexes and watches, and
// serves the lanes view at DebugLanesPath on the manager's metrics server
// (so it has that server's address and access rules, and is off when metrics
// are off). The
// controller runs only on the elected leader; webhooks on the same manager
// keep serving on every replica. It reads claims through the index
// claims.AddIndex registers on the manager.
func SetupWithManager(ctx context.Context, mgr ctrl.Manager, o Options) error {
	if o.OCICAFile != "" && o.OCI.HTTPClient == nil {
		c, err := httpClientTrusting(o.OCICAFile)
		if err != nil {
			return err
		}
		o.OCI.HTTPClient = c
	}
	factory := oci.NewFactory(o.OCI)
	r := &Reconciler{
		client:    mgr.GetClient(),
		apiReader: mgr.GetAPIReader(),
		secrets:   newSecretValues(mgr.GetAPIReader(), o.SecretNamespaces),
		events:    mgr.GetEventRecorder("lbregistrar"),
		clientFor: func(c oci.Credentials) (backendSetAPI, error) { return factory.Client(c) },
		lanes:     newLanes(),
		wakeups:   &wakeups{},
		elected:   mgr.Elected(),
		opts:      o,
	}
	return r.setup(ctx, mgr)
}

func (r *Reconciler) setup(ctx context.Context, mgr ctrl.Manager) error {
	idx := mgr.GetFieldIndexer()
	if err := idx.IndexField(ctx, &v1beta1.LBRegistrar{}, serviceIndex, indexServices); err != nil {
		return err
	}
	if err := idx.IndexField(ctx, &v1beta1.LBRegistrar{}, secretIndex, indexSecrets); err != nil {
		return err
	}

	if err := mgr.AddMetricsServerExtraHandler(DebugLanesPath, http.HandlerFunc(r.serveLanes)); err != nil {
		return err
	}
	secretEvents, err := r.secretSource(mgr)
	if err != nil {
		return err
	}
	return ctrl.NewControllerManagedBy(mgr).
		Named("lbregistrar").
		For(&v1beta1.LBRegistrar{}, builder.WithPredicates(predicate.Or[client.Object](
			predicate.GenerationChangedPredicate{}, predicate.AnnotationChangedPredicate{}, deletionStarted()))).
		Watches(&v1beta1.LBRegistrar{}, handler.EnqueueRequestsFromMapFunc(r.claimSiblings),
			builder.WithPredicates(predicate.Or[client.Object](
				predicate.GenerationChangedPredicate{}, predicate.AnnotationChangedPredicate{}, deletionStarted()))).
		Watches(&corev1.Node{}, handler.EnqueueRequestsFromMapFunc(r.everyResource),
			builder.WithPredicates(nodeChanged())).
		Watches(&corev1.Service{}, handler.EnqueueRequestsFromMapFunc(r.byService),
			builder.WithPredicates(serviceSpecChanged())).
		Watches(&discoveryv1.EndpointSlice{}, handler.EnqueueRequestsFromMapFunc(r.byEndpointSlice)).
		WatchesRawSource(secretEvents).
		WatchesRawSource(r.wakeups).
		WithOptions(controller.Options{
			MaxConcurrentReconciles: r.opts.Workers,
			RateLimiter: workqueue.NewTypedMaxOfRateLimiter(
				workqueue.NewTypedItemExponentialFailureRateLimiter[reconcile.Request](200*time.Millisecond, 5*time.Minute),
				&workqueue.TypedBucketRateLimiter[reconcile.Request]{Limiter: rate.NewLimiter(20, 200)},
			),
		}).
		Complete(r)
}

// secretSource watches the metadata of Secrets (never their data) in the
// namespaces API keys may live in, through a cache of its own when those are
// not every namespace; the same cache tells secretValues when a Secret changed.
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
	r.secrets.meta = c
	return source.Kind[client.Object](c, meta, handler.EnqueueRequestsFromMapFunc(r.bySecret)), nil
}

func indexServices(obj client.Object) []string {
	lbr, ok := obj.(*v1beta1.LBRegistrar)
	if !ok {
		return nil
	}
	var keys []string
	for _, t := range lbr.Spec.Services {
		if t.Name != "" {
			keys = append(keys, t.Namespace+"/"+t.Name)
		}
	}
	return keys
}

func indexSecrets(obj client.Object) []string {
	lbr, ok := obj.(*v1beta1.LBRegistrar)
	if !ok {
		return nil
	}
	return secretRefs(&lbr.Spec.APIKey)
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

func (r *Reconciler) requests(ctx context.Context, opts ...client.ListOption) []reconcile.Request {
	var list v1beta1.LBRegistrarList
	if err := r.client.List(ctx, &list, opts...); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "listing LBRegistrars for a watch event")
		return nil
	}
	reqs := make([]reconcile.Request, 0, len(list.Items))
	for i := range list.Items {
		reqs = append(reqs, reconcile.Request{NamespacedName: types.NamespacedName{Name: list.Items[i].Name}})
	}
	return reqs
}

func (r *Reconciler) everyResource(ctx context.Context, _ client.Object) []reconcile.Request {
	return r.requests(ctx)
}

func (r *Reconciler) byService(ctx context.Context, obj client.Object) []reconcile.Request {
	return r.requests(ctx, client.MatchingFields{serviceIndex: obj.GetNamespace() + "/" + obj.GetName()})
}

// byEndpointSlice maps a slice to the resources whose nodes depend on the
// Service's endpoints: targets with filterByEndpoints, or any target of a
// Service with externalTrafficPolicy: Local. Slices change often; the others
// need not hear about it.
func (r *Reconciler) byEndpointSlice(ctx context.Context, obj client.Object) []reconcile.Request {
	name := obj.GetLabels()[discoveryv1.LabelServiceName]
	if name == "" {
		return nil
	}
	key := types.NamespacedName{Namespace: obj.GetNamespace(), Name: name}
	var list v1beta1.LBRegistrarList
	if err := r.client.List(ctx, &list, client.MatchingFields{serviceIndex: key.String()}); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "listing LBRegistrars for an EndpointSlice event")
		return nil
	}
	var svc corev1.Service
	local := r.client.Get(ctx, key, &svc) == nil && svc.Spec.ExternalTrafficPolicy == corev1.ServiceExternalTrafficPolicyLocal
	var reqs []reconcile.Request
	for i := range list.Items {
		for _, t := range list.Items[i].Spec.Services {
			if t.Namespace == key.Namespace && t.Name == key.Name && (local || t.FilterByEndpoints) {
				reqs = append(reqs, reconcile.Request{NamespacedName: types.NamespacedName{Name: list.Items[i].Name}})
				break
			}
		}
	}
	return reqs
}

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
		for _, req := range r.requests(ctx, client.MatchingFields{claims.IndexField: key}) {
			if !seen[req.Name] {
				seen[req.Name] = true
				reqs = append(reqs, req)
			}
		}
	}
	return reqs
}

// httpClientTrusting returns an HTTP client that trusts the system roots and
// the certificates in caFile.
func httpClientTrusting(caFile string) (*http.Client, error) {
	pemData, err := os.ReadFile(caFile)
	if err != nil {
		return nil, fmt.Errorf("--oci-ca-file: %w", err)
	}
	pool, err := x509.SystemCertPool()
	if err != nil {
		pool = x509.NewCertPool()
	}
	if !pool.AppendCertsFromPEM(pemData) {
		return nil, fmt.Errorf("--oci-ca-file: %s holds no PEM certificate", caFile)
	}
	transport := http.DefaultTransport.(*http.Transport).Clone()
	transport.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	return &http.Client{Timeout: 60 * time.Second, Transport: transport}, nil
}
