package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	crconfig "sigs.k8s.io/controller-runtime/pkg/client/config"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/peppy-ratio/lbregistrar/api"
	"github.com/peppy-ratio/lbregistrar/certs"
	"github.com/peppy-ratio/lbregistrar/conversion"
	"github.com/peppy-ratio/lbregistrar/index"
	"github.com/peppy-ratio/lbregistrar/reconciler"
	"github.com/peppy-ratio/lbregistrar/webhook"
)

// shutdownReserve is the part of the graceful shutdown kept, after the
// last accepted write is waited for, to record it in status (at most
// reconciler's status write timeout), release the lease and exit.
const shutdownReserve = 15 * time.Second

// Certificate modes of serve.
const (
	certModeBuiltin     = "builtin"
	certModeCertManager = "cert-manager"
)

type serveOptions struct {
	kubeconfig  string
	kubeQPS     float32
	kubeBurst   int
	verbosity   int
	leaderElect bool
	// shutdownTimeout is the manager's graceful shutdown: in-flight writes
	// get it less shutdownReserve (see docs/operations.md, "Shutdown").
	shutdownTimeout time.Duration

	webhookAddr    string
	metricsAddr    string
	metricsSecure  bool
	healthAddr     string
	addressesFile  string
	enableHTTP2    bool
	maxRequestSize int64
	requestTimeout time.Duration
	memoryBudget   int64
	maxConnections int
	maxPerSource   int
	clientCAFile   string

	certMode       string
	namespace      string
	serviceName    string
	extraHosts     []string
	certSecret     string
	certificate    string
	validatingName string
	mutatingName   string
	crdName        string

	reconciler reconciler.Options
}

func newServeCommand() *cobra.Command { return newServeOptions().command() }

func newServeOptions() *serveOptions {
	return &serveOptions{kubeQPS: -1, kubeBurst: -1, shutdownTimeout: 100 * time.Second, reconciler: reconciler.DefaultOptions()}
}

// command is serve with its flags bound to o.
func (o *serveOptions) command() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run the webhooks (validation, conversion) and the controllers",
		Long: `Run the webhook server (validation of both API versions, conversion), its
certificate, health and readiness probes and metrics, and the controllers.

Certificates (--cert-mode):
  builtin       a self-signed CA and serving certificate kept in --cert-secret,
                renewed before expiry; the CA bundle is written into the
                validating webhook configuration and the CRD.
  cert-manager  cert-manager issues --certificate into --cert-secret and
                cainjector writes the CA bundle; serving starts once the
                Certificate is Ready.

See docs/certificates.md.`,
		Args: cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error { return o.run() },
	}
	f := cmd.Flags()
	f.StringVar(&o.kubeconfig, "kubeconfig", "", "kubeconfig file; in-cluster configuration or $KUBECONFIG when empty")
	f.Float32Var(&o.kubeQPS, "kube-api-qps", o.kubeQPS, "Kubernetes API requests per second from this process; negative: no client-side limit (the API server's priority and fairness decides)")
	f.IntVar(&o.kubeBurst, "kube-api-burst", o.kubeBurst, "Kubernetes API requests allowed in a burst above --kube-api-qps")
	f.IntVarP(&o.verbosity, "v", "v", 0, "log verbosity")
	f.BoolVar(&o.leaderElect, "leader-elect", false, "elect one replica to run the controllers (every replica serves webhooks)")
	f.DurationVar(&o.shutdownTimeout, "graceful-shutdown-timeout", o.shutdownTimeout,
		"how long shutdown may take: a write OCI accepted is waited for and recorded; keep it below the pod's terminationGracePeriodSeconds")
	f.StringVar(&o.webhookAddr, "webhook-addr", ":9443", "webhook server address (port 0: any free port, see --addresses-file)")
	f.StringVar(&o.metricsAddr, "metrics-addr", ":8080", `metrics address ("0" disables; port 0: any free port)`)
	f.BoolVar(&o.metricsSecure, "metrics-secure", true, "serve metrics and the lanes view over HTTPS, only to callers authorized to get them (false: plain HTTP to anyone)")
	f.StringVar(&o.healthAddr, "health-addr", ":8081", `health and readiness probe address ("0" disables; port 0: any free port)`)
	f.StringVar(&o.addressesFile, "addresses-file", "", `once every listener is bound, write their addresses to this file as JSON {"webhook":…,"health":…,"metrics":…} (a disabled one left out), replacing it whole`)
	f.BoolVar(&o.enableHTTP2, "enable-http2", false, "offer HTTP/2 on the webhook server")
	f.Int64Var(&o.maxRequestSize, "max-request-bytes", webhook.DefaultMaxRequestBytes, "largest webhook request body")
	f.DurationVar(&o.requestTimeout, "request-timeout", webhook.DefaultRequestTimeout, "time to read a webhook request and write its response")
	f.Int64Var(&o.memoryBudget, "webhook-memory-budget-bytes", webhook.DefaultMemoryBudget, "memory webhook requests in flight may take together; past it they wait, then get 503")
	f.IntVar(&o.maxConnections, "webhook-max-connections", webhook.DefaultMaxConnections, "webhook connections open at once; one serving no request is closed to make room for a new one")
	f.IntVar(&o.maxPerSource, "webhook-max-connections-per-source", webhook.DefaultMaxConnectionsPerSource, "webhook connections open at once from one address (raise it where one proxy, such as konnectivity, carries all of the API server's calls)")
	f.StringVar(&o.clientCAFile, "webhook-client-ca-file", "", "PEM CA bundle: the admission webhooks answer only callers with a client certificate it signed, as the API server's AdmissionConfiguration gives it (conversion stays open: the API server has no client certificate for it)")
	f.StringVar(&o.certMode, "cert-mode", certModeBuiltin, `certificate mode: "builtin" or "cert-manager"`)
	f.StringVar(&o.namespace, "namespace", envOr("POD_NAMESPACE", "lbregistrar-system"), "namespace of the webhook Service and certificate Secret")
	f.StringVar(&o.serviceName, "service-name", "lbregistrar-webhook", "webhook Service; its DNS names go into the built-in serving certificate")
	f.StringSliceVar(&o.extraHosts, "webhook-host", nil, "more DNS names or IP addresses for the built-in serving certificate")
	f.StringVar(&o.certSecret, "cert-secret", "lbregistrar-webhook-tls", "Secret containing the serving certificate")
	f.StringVar(&o.certificate, "certificate", "lbregistrar-webhook", "cert-manager Certificate of the webhook (cert-manager mode)")
	f.StringVar(&o.validatingName, "validating-webhook-configuration", "lbregistrar-validating", "ValidatingWebhookConfiguration whose caBundle the built-in mode keeps current")
	f.StringVar(&o.mutatingName, "mutating-webhook-configuration", "lbregistrar-mutating", "MutatingWebhookConfiguration (readiness gates) whose caBundle the built-in mode keeps current")
	f.StringVar(&o.crdName, "crd", reconciler.CRDName, "CRD whose conversion caBundle the built-in mode keeps current")
	o.reconciler.BindFlags(f)
	return cmd
}

func (o *serveOptions) run() error {
	log := newLogger(o.verbosity)
	ctrl.SetLogger(log)
	klog.SetLogger(log)
	// SIGTERM and SIGINT stop the manager, which lets webhook requests in
	// flight finish.
	ctx := ctrl.LoggerInto(ctrl.SetupSignalHandler(), log)

	cfg, err := o.restConfig()
	if err != nil {
		return err
	}
	if o.shutdownTimeout <= shutdownReserve {
		return fmt.Errorf("--graceful-shutdown-timeout: %s leaves nothing beyond the %s kept to record the last write, release the lease and exit", o.shutdownTimeout, shutdownReserve)
	}
	o.reconciler.ShutdownWait = o.shutdownTimeout - shutdownReserve
	o.reconciler.RecordKey.Namespace = o.namespace
	mgr, addrs, err := o.newManager(cfg)
	if err != nil {
		return err
	}
	if err := setupComponents(ctx, mgr, o); err != nil {
		return err
	}
	if o.addressesFile != "" {
		if err := writeAddresses(o.addressesFile, addrs); err != nil {
			return err
		}
	}
	return mgr.Start(ctx)
}

// newManager builds the manager with the webhook server (which runs the
// certificate source, see webhook.CertificateSource), the probes and the
// metrics endpoint, every one listening already, at the addresses returned;
// setupComponents adds what it serves and runs.
func (o *serveOptions) newManager(cfg *rest.Config) (manager.Manager, listenerAddresses, error) {
	source, err := o.certSource(cfg)
	if err != nil {
		return nil, listenerAddresses{}, err
	}
	srv, err := webhook.NewServer(webhook.ServerOptions{
		Addr:                    o.webhookAddr,
		Certificate:             source,
		EnableHTTP2:             o.enableHTTP2,
		MaxRequestBytes:         o.maxRequestSize,
		RequestTimeout:          o.requestTimeout,
		MemoryBudget:            o.memoryBudget,
		MaxConnections:          o.maxConnections,
		MaxConnectionsPerSource: o.maxPerSource,
		ClientCAFile:            o.clientCAFile,
		AnonymousPaths:          []string{conversion.Path},
	})
	if err != nil {
		return nil, listenerAddresses{}, err
	}
	health, err := listen("health", "health-addr", o.healthAddr)
	if err != nil {
		return nil, listenerAddresses{}, err
	}
	metrics, err := listen("metrics", "metrics-addr", o.metricsAddr)
	if err != nil {
		return nil, listenerAddresses{}, err
	}
	addrs := listenerAddresses{Webhook: srv.Addr().String(), Health: addressOf(health), Metrics: addressOf(metrics)}
	mgr, err := ctrl.NewManager(cfg, manager.Options{
		Scheme:        newScheme(),
		Cache:         reconciler.CacheOptions(),
		WebhookServer: srv,
		// serve runs both on listeners bound above (see addHealthServer
		// and withMetricsServer).
		Metrics:                 metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress:  "0",
		LeaderElection:          o.leaderElect,
		LeaderElectionID:        "lbregistrar.nodes.peppy-ratio.dev",
		LeaderElectionNamespace: o.namespace,
		// The controller has stopped by the time the lease is released, so
		// a standby may take over at once instead of after the lease expires.
		LeaderElectionReleaseOnCancel: true,
		GracefulShutdownTimeout:       &o.shutdownTimeout,
	})
	if err != nil {
		return nil, listenerAddresses{}, err
	}
	if health != nil {
		ready := map[string]healthz.Checker{"certificate": source.ReadyCheck, "webhook-server": srv.StartedChecker()}
		if err := addHealthServer(mgr, health, ready); err != nil {
			return nil, listenerAddresses{}, err
		}
	}
	if metrics != nil {
		if mgr, err = o.withMetricsServer(mgr, cfg, metrics); err != nil {
			return nil, listenerAddresses{}, err
		}
	}
	return mgr, addrs, nil
}

// newScheme knows the core types the controllers read and every LBRegistrar
// version.
func newScheme() *runtime.Scheme {
	s := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(s))
	utilruntime.Must(api.AddToScheme(s))
	return s
}

// setupComponents registers the claim index, the webhooks and the
// controllers on the manager.
func setupComponents(ctx context.Context, mgr manager.Manager, o *serveOptions) error {
	if err := index.Add(ctx, mgr.GetFieldIndexer()); err != nil {
		return err
	}
	if err := conversion.Register(mgr); err != nil {
		return err
	}
	controller, err := webhook.WhoAmI(ctx, mgr.GetClient())
	if err != nil {
		return err
	}
	webhook.Register(mgr, webhook.IdentityPolicy{Namespaces: o.reconciler.SecretNamespaces, AllowControllerIdentity: o.reconciler.AllowControllerIdentity}, controller)
	o.reconciler.ControllerUser = controller
	return reconciler.SetupWithManager(ctx, mgr, o.reconciler)
}

func (o *serveOptions) certSource(cfg *rest.Config) (certs.Source, error) {
	switch o.certMode {
	case certModeBuiltin:
		return certs.NewRotator(cfg, certs.Options{
			Secret: types.NamespacedName{Namespace: o.namespace, Name: o.certSecret},
			Hosts: append([]string{
				fmt.Sprintf("%s.%s.svc", o.serviceName, o.namespace),
				fmt.Sprintf("%s.%s.svc.cluster.local", o.serviceName, o.namespace),
			}, o.extraHosts...),
			ValidatingWebhookConfigurations: []string{o.validatingName},
			MutatingWebhookConfigurations:   []string{o.mutatingName},
			CRDs:                            []string{o.crdName},
		})
	case certModeCertManager:
		return certs.NewCertManagerSource(cfg, certs.CertManagerOptions{Namespace: o.namespace, Certificate: o.certificate})
	default:
		return nil, fmt.Errorf("--cert-mode: %q is neither %q nor %q", o.certMode, certModeBuiltin, certModeCertManager)
	}
}

// restConfig is the connection of serve, with the client-side limits of its
// flags whichever way the cluster was found.
func (o *serveOptions) restConfig() (*rest.Config, error) {
	cfg, err := restConfig(o.kubeconfig)
	if err != nil {
		return nil, err
	}
	cfg.QPS, cfg.Burst = o.kubeQPS, o.kubeBurst
	return cfg, nil
}

// restConfig connects with the kubeconfig file given, or else the way
// controller-runtime finds one ($KUBECONFIG, in-cluster, ~/.kube/config).
// Both ways have controller-runtime's default of no client-side rate limit,
// so a file given by flag does not get client-go's 5 requests per second.
func restConfig(kubeconfig string) (*rest.Config, error) {
	if kubeconfig == "" {
		cfg, err := crconfig.GetConfig()
		if err != nil {
			return nil, errors.Join(errors.New("no Kubernetes connection: pass --kubeconfig or set $KUBECONFIG"), err)
		}
		return cfg, nil
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return nil, err
	}
	if cfg.QPS == 0 {
		cfg.QPS = -1
	}
	return cfg, nil
}

// newLogger logs JSON lines to stderr.
func newLogger(verbosity int) logr.Logger {
	return funcr.NewJSON(func(obj string) { fmt.Fprintln(os.Stderr, obj) }, funcr.Options{Verbosity: verbosity, LogTimestamp: true})
}

func envOr(name, fallback string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return fallback
}
