package reconciler

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strconv"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/oracle/oci-go-sdk/v65/common"
	"github.com/spf13/pflag"
	"golang.org/x/time/rate"

	"github.com/peppy-ratio/lbregistrar/reconciler/backendset"
	"github.com/peppy-ratio/lbregistrar/reconciler/credentials"
	"github.com/peppy-ratio/lbregistrar/reconciler/decide"
	"github.com/peppy-ratio/lbregistrar/reconciler/oci"
)

// Options configure the reconciler.
type Options struct {
	OCI oci.Options
	// Workers bounds how many resources (and so load balancers) are
	// reconciled at once, and how many pods' readiness gates are decided
	// at once.
	Workers int
	// Resync is the period, jittered by up to 10%, at which every resource
	// is reconciled again to repair drift made outside the controller.
	Resync time.Duration
	// WatchPeriod is how often the work requests of each load balancer a
	// resource keeps are listed, to notice within it a change another
	// writer made (package lbwatch); 0 leaves that to the resync.
	WatchPeriod time.Duration
	// DrainPeriod is how long a deleted resource's backends stay drained,
	// from the end of the work request that drained them, before they are
	// removed.
	DrainPeriod time.Duration
	// NodeDrainPeriod is how long a backend this resource no longer wants
	// (its node left, was excluded, or stopped hosting the Service's
	// endpoints; its pod is terminating or gone) stays drained before it is
	// removed; 0 removes it at once.
	NodeDrainPeriod time.Duration
	// EndpointBatchPeriod is how long, at the most, a reconcile that an
	// endpoint or a gated pod changed waits, so that the changes coming
	// after it are written with it: a rollout's pods start together but
	// are published one by one (see batches).
	EndpointBatchPeriod time.Duration
	// EndpointBatchQuiet ends such a wait early: once no change has come
	// for this long.
	EndpointBatchQuiet time.Duration
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
	// BackendHealth reads the health of each backend set kept registered,
	// one GetBackendSetHealth after each sync, into the status. Off, a
	// reconcile where nothing changed reads each backend set once, nothing
	// more, and the status shows no health.
	BackendHealth bool
	// RequireReadyNodes registers only Ready nodes (see desired.Options).
	RequireReadyNodes bool
	Backoff           backendset.Backoff
	// SecretNamespaces are the namespaces API key Secrets are read from and
	// watched in; empty means every namespace (which needs cluster-wide
	// access to Secrets).
	SecretNamespaces []string
	// AllowControllerIdentity lets resources sign in as the controller
	// itself; the webhook then asks that their writers may.
	AllowControllerIdentity bool
	// ControllerUser is who the controller runs as (serve asks the API
	// server); a resource signing in as the controller uses its
	// ServiceAccount's workload identity.
	ControllerUser string
	// InstanceDispatcher, when set, answers the calls of the instance
	// principal provider (tests; see credentials.Builders).
	InstanceDispatcher func(common.HTTPRequestDispatcher) (common.HTTPRequestDispatcher, error)
	// WorkloadIdentityHost is where OKE workload identity's token exchange
	// listens (port 12250); empty means the API server's host, as on OKE.
	// WorkloadIdentityCAFile names a PEM bundle trusted for it besides the
	// API server's CA.
	WorkloadIdentityHost   string
	WorkloadIdentityCAFile string
	// OCICAFile names a PEM bundle trusted for OCI endpoints besides the
	// system roots (private endpoints); ignored when OCI.HTTPClient is set.
	OCICAFile string
	// DryRun decides and plans as usual but writes nothing to OCI, nor
	// ownership records or finalizers: each write it would make is
	// reported instead (see holdWrites).
	DryRun bool
	// RecordKey is the Secret with the key ownership records are signed
	// with (package ownership); made on the first signature.
	RecordKey types.NamespacedName
}

// DefaultRecordKeySecret is the Secret, in the controller's namespace,
// that contains the key ownership records are signed with.
const DefaultRecordKeySecret = "lbregistrar-record-key"

// DefaultNodeDrainPeriod outlasts an idle keep-alive connection: OCI's
// load balancer keeps a client's for 65 s of idleness, which cannot be
// changed (OCI docs, Load Balancer Timeout Connection Settings), so a
// client between requests is not cut.
const DefaultNodeDrainPeriod = 70 * time.Second

// DefaultEndpointBatchPeriod and DefaultEndpointBatchQuiet: a batch
// lasts while changes keep coming, each within 200 ms of the one before,
// and 800 ms at the most. A surge batch's old pods terminate and its new
// pods start within moments of each other, so one write takes them all;
// and the longest wait stays below the least time OCI takes for a write
// (a second): a change that just missed a write waits that long anyway,
// so holding a change longer would cost it more than it saves the others.
const (
	DefaultEndpointBatchPeriod = 800 * time.Millisecond
	DefaultEndpointBatchQuiet  = 200 * time.Millisecond
)

// DefaultOptions are the defaults the flags start from.
func DefaultOptions() Options {
	o := Options{
		OCI:                 oci.DefaultOptions(),
		Workers:             8,
		Resync:              10 * time.Minute,
		WatchPeriod:         10 * time.Second,
		DrainPeriod:         30 * time.Second,
		NodeDrainPeriod:     DefaultNodeDrainPeriod,
		EndpointBatchPeriod: DefaultEndpointBatchPeriod,
		EndpointBatchQuiet:  DefaultEndpointBatchQuiet,
		CleanupTimeout:      30 * time.Minute,
		WorkRequestTimeout:  10 * time.Minute,
		ShutdownWait:        85 * time.Second,
		BackendHealth:       true,
		Backoff:             backendset.Backoff{Base: 500 * time.Millisecond, Max: 30 * time.Second, Attempts: 8},
	}
	// In a cluster, API keys are read from the controller's own namespace
	// unless said otherwise; that is what the shipped RBAC allows.
	o.RecordKey = types.NamespacedName{Namespace: "lbregistrar-system", Name: DefaultRecordKeySecret}
	if ns := os.Getenv("POD_NAMESPACE"); ns != "" {
		o.SecretNamespaces = []string{ns}
		o.RecordKey.Namespace = ns
	}
	return o
}

// BindFlags registers the reconciler's flags on fs, with o's values as defaults.
func (o *Options) BindFlags(fs *pflag.FlagSet) {
	o.BindPlanFlags(fs)
	fs.BoolVar(&o.DryRun, "dry-run", o.DryRun,
		"Write nothing to OCI: report each planned write as an Event, in lbregistrar_pending_writes and /debug/lanes, and as Ready=False reason DryRun")
	fs.StringVar(&o.RecordKey.Name, "record-key-secret", o.RecordKey.Name,
		"Secret in --namespace with the key ownership records are signed with; made on the first signature")
	fs.Var((*limitValue)(&o.OCI.RateLimit), "oci-rate-limit", "OCI API calls per second, across all load balancers")
	fs.IntVar(&o.OCI.Burst, "oci-burst", o.OCI.Burst, "OCI API calls allowed in a burst above --oci-rate-limit")
	fs.DurationVar(&o.OCI.PollMin, "work-request-poll-min", o.OCI.PollMin, "Shortest interval between work request polls")
	fs.DurationVar(&o.OCI.PollMax, "work-request-poll-max", o.OCI.PollMax, "Longest interval between work request polls")
	fs.IntVar(&o.Workers, "reconcile-workers", o.Workers, "LBRegistrars reconciled in parallel, status writes in progress at once, and pods' readiness gates decided at once; waiting for OCI work requests occupies no worker, so this does not bound how many load balancers are written at once")
	fs.DurationVar(&o.Resync, "resync-period", o.Resync, "Period of the drift-repairing resync (jittered by up to 10%)")
	fs.DurationVar(&o.WatchPeriod, "oci-watch-period", o.WatchPeriod,
		"How often each kept load balancer's work requests are listed to notice other writers' changes (within a quarter of --oci-rate-limit); 0 leaves them to the resync")
	fs.DurationVar(&o.EndpointBatchPeriod, "endpoint-batch-period", o.EndpointBatchPeriod,
		"Longest wait of a change of a Service's endpoints (or of a gated pod) before it is written, to be written with the changes that follow it; 0 writes at once")
	fs.DurationVar(&o.EndpointBatchQuiet, "endpoint-batch-quiet", o.EndpointBatchQuiet,
		"Ends that wait early once no change has come for this long; 0 (or above --endpoint-batch-period) waits the whole period")
	fs.DurationVar(&o.CleanupTimeout, "cleanup-timeout", o.CleanupTimeout, "How long deletion retries deregistering before it lets the resource go")
	fs.DurationVar(&o.WorkRequestTimeout, "work-request-timeout", o.WorkRequestTimeout, "Longest wait for one OCI work request")
	fs.IntVar(&o.Backoff.Attempts, "write-attempts", o.Backoff.Attempts, "Attempts of one backend-set write within a reconcile")
	fs.BoolVar(&o.BackendHealth, "backend-health", o.BackendHealth,
		"Read each backend set's health after syncing it (one more OCI read per backend set per reconcile) into status and the Healthy column")
}

// BindPlanFlags registers the flags lbregistrar plan shares with serve:
// where OCI is reached and what the desired state depends on, so a plan
// given serve's values computes what serve does.
func (o *Options) BindPlanFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.OCI.LoadBalancerEndpoint, "oci-loadbalancer-endpoint", o.OCI.LoadBalancerEndpoint,
		"Base URL of the OCI Load Balancer API, replacing the regional one (private or dedicated-region endpoints)")
	fs.StringVar(&o.OCI.NetworkLoadBalancerEndpoint, "oci-networkloadbalancer-endpoint", o.OCI.NetworkLoadBalancerEndpoint,
		"Base URL of the OCI Network Load Balancer API, replacing the regional one")
	fs.StringVar(&o.OCI.CoreEndpoint, "oci-core-endpoint", o.OCI.CoreEndpoint,
		"Base URL of the OCI Core Services API (instances, VNICs, private IPs: read for pod targets of source-preserving NLB backend sets), replacing the regional one")
	fs.StringVar(&o.OCICAFile, "oci-ca-file", o.OCICAFile, "PEM file of CA certificates trusted for the OCI endpoints, besides the system ones")
	fs.BoolVar(&o.RequireReadyNodes, "require-ready-nodes", o.RequireReadyNodes,
		"Register only Ready nodes (by default the load balancer health check decides; when no node is Ready the filter is dropped)")
	fs.DurationVar(&o.NodeDrainPeriod, "node-drain-period", o.NodeDrainPeriod,
		"How long a departing node's or pod's backends are drained (no new connections, open ones finish) before removal; 0 removes them at once")
	fs.DurationVar(&o.DrainPeriod, "drain-period", o.DrainPeriod, "How long the backends of an LBRegistrar that is deleted, or whose loadBalancerId changed, are drained on the load balancer it leaves, from the end of the drain's work request, before removal")
	fs.StringVar(&o.WorkloadIdentityHost, "workload-identity-host", o.WorkloadIdentityHost,
		"Where OKE workload identity's token exchange listens (port 12250); default: the API server's host")
	fs.StringVar(&o.WorkloadIdentityCAFile, "workload-identity-ca-file", o.WorkloadIdentityCAFile,
		"PEM bundle trusted for OKE workload identity's token exchange besides the API server's CA")
	fs.BoolVar(&o.AllowControllerIdentity, "allow-controller-identity", o.AllowControllerIdentity,
		"Let resources sign in to OCI as the controller itself (workloadIdentity without a serviceAccount, instancePrincipal); writers also need use on identities.nodes.peppy-ratio.dev named controller")
	fs.StringSliceVar(&o.SecretNamespaces, "secret-namespaces", o.SecretNamespaces,
		"Namespaces API key Secrets are read from (default: $POD_NAMESPACE when set); an empty value means every namespace")
}

// builders are how resources sign in, serve's and plan --keyless' alike:
// with an API key through key, without one through session, workload
// identity as workloadIdentity says, and as the controller itself where
// the options allow it.
func (o Options) builders(key func(oci.Credentials) (ociAPI, error),
	session func(identity, region string, newProvider func() (common.ConfigurationProvider, error)) (ociAPI, error),
	workloadIdentity *credentials.WorkloadIdentity) credentials.Builders[ociAPI] {
	return credentials.Builders[ociAPI]{Key: key, Session: session, WorkloadIdentity: workloadIdentity,
		AllowController: o.AllowControllerIdentity, ControllerUser: o.ControllerUser, InstanceDispatcher: o.InstanceDispatcher}
}

// workloadIdentity is how resources naming a ServiceAccount sign in:
// OKE's token exchange on the API server's host (or WorkloadIdentityHost),
// trusted with the API server's CA (and WorkloadIdentityCA), with tokens
// requested through tokens, as cfg's user, in the namespaces Secrets are
// read from.
func (o Options) workloadIdentity(cfg *rest.Config, tokens client.Client) (*credentials.WorkloadIdentity, error) {
	w := &credentials.WorkloadIdentity{Host: o.WorkloadIdentityHost, CA: cfg.CAData, Tokens: tokens, Namespaces: o.SecretNamespaces}
	if w.Host == "" {
		u, err := url.Parse(cfg.Host)
		if err != nil {
			return nil, fmt.Errorf("the API server's host, where OKE workload identity is reached: %w", err)
		}
		w.Host = u.Hostname()
	}
	for _, file := range []string{cfg.CAFile, o.WorkloadIdentityCAFile} {
		if file == "" {
			continue
		}
		data, err := os.ReadFile(file)
		if err != nil {
			return nil, err
		}
		w.CA = slices.Concat(w.CA, data)
	}
	return w, nil
}

// ociFactory builds the OCI clients' factory o describes.
func (o Options) ociFactory() (*oci.Factory, error) {
	if o.OCICAFile != "" && o.OCI.HTTPClient == nil {
		c, err := httpClientTrusting(o.OCICAFile)
		if err != nil {
			return nil, err
		}
		o.OCI.HTTPClient = c
	}
	return oci.NewFactory(o.OCI), nil
}

// limitValue is a rate.Limit as a flag value.
type limitValue rate.Limit

func (l *limitValue) String() string { return strconv.FormatFloat(float64(*l), 'g', -1, 64) }

func (l *limitValue) Type() string { return "float" }

func (l *limitValue) Set(s string) error {
	v, err := strconv.ParseFloat(s, 64)
	if err != nil || v <= 0 {
		return fmt.Errorf("want a positive number of calls per second, got %q", s)
	}
	*l = limitValue(v)
	return nil
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
		return nil, fmt.Errorf("--oci-ca-file: %s contains no PEM certificate", caFile)
	}
	transport := http.DefaultTransport.(*http.Transport).Clone()
	transport.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	return &http.Client{Timeout: 60 * time.Second, Transport: transport}, nil
}

// decide is what deciding takes of o.
func (o Options) decide() decide.Options {
	return decide.Options{RequireReadyNodes: o.RequireReadyNodes, NodeDrainPeriod: o.NodeDrainPeriod, DrainPeriod: o.DrainPeriod}
}
