package kube

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/yaml"

	"github.com/peppy-ratio/lbregistrar/certs"
	"github.com/peppy-ratio/lbregistrar/conversion"
	"github.com/peppy-ratio/lbregistrar/index"
	"github.com/peppy-ratio/lbregistrar/webhook"
)

// WebhookOptions configure the in-process webhook server.
type WebhookOptions struct {
	// Certs tunes the built-in certificate mode (lifetimes, delays). The
	// Secret, the hosts and the objects to publish the CA bundle to are
	// filled in; zero SyncInterval and PropagationDelay become a fraction of
	// a second and three seconds, so a rotation completes within a test.
	Certs certs.Options

	// Identities says what writers may make lbregistrar sign in with; its
	// Reviewer and Grants are filled in.
	Identities webhook.IdentityPolicy

	// Setup adds more to the manager before it starts, e.g. a reconciler.
	Setup func(manager.Manager) error
}

// Webhooks is a running manager with the webhook server and its built-in
// certificate source.
type Webhooks struct {
	// URL is the server's base URL, https://127.0.0.1:PORT.
	URL     string
	Server  *webhook.Server
	Rotator *certs.Rotator
	Manager manager.Manager

	cancel context.CancelFunc
	done   chan error // the manager's result
}

// StartWebhooks starts a manager serving every LBRegistrar webhook on
// 127.0.0.1 at a free port, the way lbregistrar serve does: install is
// called first with the server's URL to write the webhook configurations
// and the CRD without a CA bundle, then the manager starts, its webhook
// server runs the certificate source, and the source publishes the bundle.
// It returns once the certificate is published and served.
func StartWebhooks(ctx context.Context, cfg *rest.Config, scheme *runtime.Scheme, o WebhookOptions, install func(url string) error) (_ *Webhooks, err error) {
	source, err := newRotator(cfg, o.Certs)
	if err != nil {
		return nil, err
	}
	srv, err := webhook.NewServer(webhook.ServerOptions{Addr: "127.0.0.1:0", Certificate: source})
	if err != nil {
		return nil, err
	}
	w := &Webhooks{URL: "https://" + srv.Addr().String(), Server: srv, Rotator: source}
	// The manager's cache needs the CRD installed.
	if err := install(w.URL); err != nil {
		return nil, err
	}
	w.Manager, err = manager.New(cfg, manager.Options{
		Scheme:                 scheme,
		WebhookServer:          srv,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		// Several managers may run in one test binary.
		Controller: config.Controller{SkipNameValidation: ptr.To(true)},
	})
	if err != nil {
		return nil, err
	}
	if err := index.Add(ctx, w.Manager.GetFieldIndexer()); err != nil {
		return nil, err
	}
	if err := conversion.Register(w.Manager); err != nil {
		return nil, err
	}
	controller, err := webhook.WhoAmI(ctx, w.Manager.GetClient())
	if err != nil {
		return nil, err
	}
	webhook.Register(w.Manager, o.Identities, controller)
	if o.Setup != nil {
		if err := o.Setup(w.Manager); err != nil {
			return nil, err
		}
	}
	runCtx, cancel := context.WithCancel(context.Background())
	w.cancel, w.done = cancel, make(chan error, 1)
	go func() { w.done <- w.Manager.Start(runCtx) }()
	defer func() {
		if err != nil {
			_ = w.Stop()
		}
	}()
	err = wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
		select {
		case err := <-w.done:
			w.done <- err // for Stop
			return false, fmt.Errorf("the manager stopped: %w", err)
		default:
		}
		return source.ReadyCheck(nil) == nil && srv.StartedChecker()(nil) == nil, nil
	})
	if err != nil {
		return nil, fmt.Errorf("waiting for the webhook certificate and server: %w", err)
	}
	return w, nil
}

func newRotator(cfg *rest.Config, opts certs.Options) (*certs.Rotator, error) {
	opts.Secret = types.NamespacedName{Namespace: Namespace, Name: CertSecret}
	opts.Hosts = []string{"127.0.0.1", "localhost"}
	opts.ValidatingWebhookConfigurations = []string{ValidatingWebhook}
	opts.MutatingWebhookConfigurations = []string{MutatingWebhook}
	opts.CRDs = []string{CRDName}
	if opts.SyncInterval == 0 {
		opts.SyncInterval = 250 * time.Millisecond
	}
	if opts.PropagationDelay == 0 {
		opts.PropagationDelay = 3 * time.Second
	}
	return certs.NewRotator(cfg, opts)
}

// CABundle is the CA bundle of the serving certificate's Secret (ca.crt, as
// both certificate modes write it).
func (w *Webhooks) CABundle(ctx context.Context, cfg *rest.Config) ([]byte, error) {
	c, err := client.New(cfg, client.Options{})
	if err != nil {
		return nil, err
	}
	secret := &corev1.Secret{}
	if err := c.Get(ctx, types.NamespacedName{Namespace: Namespace, Name: CertSecret}, secret); err != nil {
		return nil, err
	}
	if len(secret.Data["ca.crt"]) == 0 {
		return nil, errors.New("the certificate Secret has no ca.crt")
	}
	return secret.Data["ca.crt"], nil
}

// Stop stops the manager and the certificate source, and waits for the
// manager; requests in flight finish first.
func (w *Webhooks) Stop() error {
	if w.cancel == nil {
		return nil
	}
	w.cancel()
	w.cancel = nil
	return <-w.done
}

// UnreachableURL is a webhook URL nothing answers at (no process listens on
// port 0). The CRD and webhooks point at it until lbregistrar serve runs:
// its cache needs the CRD when it starts, and its address is known only
// once it has.
const UnreachableURL = "https://127.0.0.1:0"

// PointWebhooksAt installs config/webhook's validating and mutating webhook
// configurations and the CRD with its conversion webhook, every webhook
// pointed at url and trusting caBundle; none keeps the bundle already
// there, which lbregistrar serve publishes (it may have before they are
// pointed at it).
func (c *Cluster) PointWebhooksAt(ctx context.Context, url string, caBundle []byte) error {
	if err := c.InstallValidatingWebhook(ctx, url, caBundle); err != nil {
		return err
	}
	if err := c.installMutatingWebhook(ctx, url, caBundle); err != nil {
		return err
	}
	if err := c.installPolicy(ctx); err != nil {
		return err
	}
	return c.InstallCRD(ctx, url, caBundle)
}

// installPolicy creates or replaces config/webhook's admission policy of
// readiness gates and its binding.
func (c *Cluster) installPolicy(ctx context.Context) error {
	data, err := os.ReadFile(c.Root + "/config/webhook/policy.yaml")
	if err != nil {
		return err
	}
	docs := strings.SplitN(string(data), "\n---\n", 2)
	policy, binding := &admissionregistrationv1.ValidatingAdmissionPolicy{}, &admissionregistrationv1.ValidatingAdmissionPolicyBinding{}
	if len(docs) != 2 {
		return fmt.Errorf("config/webhook/policy.yaml: want the policy and its binding")
	}
	if err := yaml.UnmarshalStrict([]byte(docs[0]), policy); err != nil {
		return fmt.Errorf("config/webhook/policy.yaml: %w", err)
	}
	if err := yaml.UnmarshalStrict([]byte(docs[1]), binding); err != nil {
		return fmt.Errorf("config/webhook/policy.yaml: %w", err)
	}
	if err := createOrReplace(ctx, c.Client, policy, &admissionregistrationv1.ValidatingAdmissionPolicy{}, func(existing *admissionregistrationv1.ValidatingAdmissionPolicy) {
		existing.Spec = policy.Spec
	}); err != nil {
		return fmt.Errorf("installing the admission policy: %w", err)
	}
	if err := createOrReplace(ctx, c.Client, binding, &admissionregistrationv1.ValidatingAdmissionPolicyBinding{}, func(existing *admissionregistrationv1.ValidatingAdmissionPolicyBinding) {
		existing.Spec = binding.Spec
	}); err != nil {
		return fmt.Errorf("installing the admission policy's binding: %w", err)
	}
	return nil
}

// installMutatingWebhook creates or replaces config/webhook's mutating
// webhook configuration (readiness gates) pointed at url, trusting
// caBundle (none: the bundle already there).
func (c *Cluster) installMutatingWebhook(ctx context.Context, url string, caBundle []byte) error {
	mwc := &admissionregistrationv1.MutatingWebhookConfiguration{}
	if err := readYAML(c.Root+"/config/webhook/mutating.yaml", mwc); err != nil {
		return err
	}
	for i := range mwc.Webhooks {
		mwc.Webhooks[i].ClientConfig = admissionregistrationv1.WebhookClientConfig{URL: ptr.To(url + *mwc.Webhooks[i].ClientConfig.Service.Path), CABundle: caBundle}
	}
	err := createOrReplace(ctx, c.Client, mwc, &admissionregistrationv1.MutatingWebhookConfiguration{}, func(existing *admissionregistrationv1.MutatingWebhookConfiguration) {
		for i := range mwc.Webhooks {
			for _, e := range existing.Webhooks {
				if caBundle == nil && e.Name == mwc.Webhooks[i].Name {
					mwc.Webhooks[i].ClientConfig.CABundle = e.ClientConfig.CABundle
				}
			}
		}
		existing.Webhooks = mwc.Webhooks
	})
	if err != nil {
		return fmt.Errorf("installing the mutating webhook: %w", err)
	}
	return nil
}

// InstallValidatingWebhook creates or replaces config/webhook's validating
// webhook configuration with every webhook pointed at url, trusting
// caBundle (none: the bundle already there).
func (c *Cluster) InstallValidatingWebhook(ctx context.Context, url string, caBundle []byte) error {
	return c.InstallValidatingWebhookAtPath(ctx, url, "", caBundle)
}

// InstallValidatingWebhookAtPath is InstallValidatingWebhook with every
// webhook calling path on url instead of its own path (kept when path is
// empty): the same rules, failure policy and timeouts in front of another
// handler, such as a benchmark's admit-everything one.
func (c *Cluster) InstallValidatingWebhookAtPath(ctx context.Context, url, path string, caBundle []byte) error {
	vwc := &admissionregistrationv1.ValidatingWebhookConfiguration{}
	if err := readYAML(c.Root+"/config/webhook/manifests.yaml", vwc); err != nil {
		return err
	}
	for i := range vwc.Webhooks {
		hookPath := path
		if hookPath == "" {
			hookPath = *vwc.Webhooks[i].ClientConfig.Service.Path
		}
		vwc.Webhooks[i].ClientConfig = admissionregistrationv1.WebhookClientConfig{URL: ptr.To(url + hookPath), CABundle: caBundle}
	}
	err := createOrReplace(ctx, c.Client, vwc, &admissionregistrationv1.ValidatingWebhookConfiguration{}, func(existing *admissionregistrationv1.ValidatingWebhookConfiguration) {
		webhooks := slices.Clone(vwc.Webhooks)
		for i, w := range webhooks {
			for _, e := range existing.Webhooks {
				if caBundle == nil && e.Name == w.Name {
					webhooks[i].ClientConfig.CABundle = e.ClientConfig.CABundle
				}
			}
		}
		existing.Webhooks = webhooks
	})
	if err != nil {
		return fmt.Errorf("installing the validating webhooks: %w", err)
	}
	return nil
}

func urlClientConfig(url, path string, caBundle []byte) *apiextensionsv1.WebhookClientConfig {
	return &apiextensionsv1.WebhookClientConfig{URL: ptr.To(url + path), CABundle: caBundle}
}

func readYAML(path string, into any) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	if err := yaml.Unmarshal(data, into); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}
