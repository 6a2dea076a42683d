package kube

import (
	"context"
	"errors"
	"fmt"
	"os"
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
	"github.com/peppy-ratio/lbregistrar/webhook"
)

// WebhookOptions configure the in-process webhook server.
type WebhookOptions struct {
	// Certs tunes the built-in certificate mode (lifetimes, delays). The
	// Secret, the hosts and the objects to publish the CA bundle to are
	// filled in; zero SyncInterval and PropagationDelay become a fraction of
	// a second and three seconds, so a rotation completes within a test.
	Certs certs.Options

	// CertSource replaces the built-in mode, e.g. with
	// certs.NewCertManagerSource. It must serve 127.0.0.1.
	CertSource func(*rest.Config) (certs.Source, error)

	// Setup adds more to the manager before it starts, e.g. a reconciler.
	Setup func(manager.Manager) error
}

// Webhooks is a running manager with the webhook server and a certificate
// source.
type Webhooks struct {
	// URL is the server's base URL, https://127.0.0.1:PORT.
	URL     string
	Server  *webhook.Server
	Source  certs.Source
	Manager manager.Manager

	cancel     context.CancelFunc
	sourceDone chan error // the certificate source's error, if it stops early
	done       chan error // the manager's result
}

// StartWebhooks starts a manager serving every LBRegistrar webhook on
// 127.0.0.1 at a free port. Once the certificate source has a certificate,
// and before the manager starts (its cache needs the CRD), install is called
// with the server's URL and the CA bundle to write the webhook
// configurations and the CRD.
func StartWebhooks(ctx context.Context, cfg *rest.Config, scheme *runtime.Scheme, o WebhookOptions, install func(url string, caBundle []byte) error) (_ *Webhooks, err error) {
	source, err := newSource(cfg, o)
	if err != nil {
		return nil, err
	}
	srv, err := webhook.NewServer(webhook.ServerOptions{Addr: "127.0.0.1:0", GetCertificate: source.GetCertificate})
	if err != nil {
		return nil, err
	}
	runCtx, cancel := context.WithCancel(context.Background())
	w := &Webhooks{URL: "https://" + srv.Addr().String(), Server: srv, Source: source, cancel: cancel, sourceDone: make(chan error, 1)}
	defer func() {
		if err != nil {
			cancel()
		}
	}()
	go func() {
		if err := source.Start(runCtx); err != nil {
			w.sourceDone <- err
		}
	}()
	if err := w.waitFor(ctx, func() bool { return source.ReadyCheck(nil) == nil }); err != nil {
		return nil, fmt.Errorf("waiting for the webhook certificate: %w", err)
	}
	bundle, err := w.CABundle(ctx, cfg)
	if err != nil {
		return nil, err
	}
	if err := install(w.URL, bundle); err != nil {
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
	if err := webhook.Register(w.Manager); err != nil {
		return nil, err
	}
	if o.Setup != nil {
		if err := o.Setup(w.Manager); err != nil {
			return nil, err
		}
	}
	w.done = make(chan error, 1)
	go func() { w.done <- w.Manager.Start(runCtx) }()
	if err := w.waitFor(ctx, func() bool { return srv.StartedChecker()(nil) == nil }); err != nil {
		return nil, fmt.Errorf("waiting for the webhook server: %w", err)
	}
	return w, nil
}

// waitFor polls ready until it holds, failing early if a runnable stopped.
func (w *Webhooks) waitFor(ctx context.Context, ready func() bool) error {
	return wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
		select {
		case err := <-w.sourceDone:
			return false, fmt.Errorf("the certificate source stopped: %w", err)
		case err := <-w.done:
			return false, fmt.Errorf("the manager stopped: %w", err)
		default:
		}
		return ready(), nil
	})
}

func newSource(cfg *rest.Config, o WebhookOptions) (certs.Source, error) {
	if o.CertSource != nil {
		return o.CertSource(cfg)
	}
	opts := o.Certs
	opts.Secret = types.NamespacedName{Namespace: Namespace, Name: CertSecret}
	opts.Hosts = []string{"127.0.0.1", "localhost"}
	opts.ValidatingWebhookConfigurations = []string{ValidatingWebhook}
	opts.CRDs = []string{CRDName}
	if opts.SyncInterval == 0 {
		opts.SyncInterval = 250 * time.Millisecond
	}
	if opts.PropagationDelay == 0 {
		opts.PropagationDelay = 3 * time.Second
	}
	return certs.NewRotator(cfg, opts)
}

// Rotator is the built-in certificate mode's rotator, or nil in another mode.
func (w *Webhooks) Rotator() *certs.Rotator {
	r, _ := w.Source.(*certs.Rotator)
	return r
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

// InstallValidatingWebhook creates or replaces config/webhook's validating
// webhook configuration with every webhook pointed at url.
func (c *Cluster) InstallValidatingWebhook(ctx context.Context, url string, caBundle []byte) error {
	vwc := &admissionregistrationv1.ValidatingWebhookConfiguration{}
	if err := readYAML(c.Root+"/config/webhook/manifests.yaml", vwc); err != nil {
		return err
	}
	for i := range vwc.Webhooks {
		cc := vwc.Webhooks[i].ClientConfig
		vwc.Webhooks[i].ClientConfig = admissionregistrationv1.WebhookClientConfig{URL: ptr.To(url + *cc.Service.Path), CABundle: caBundle}
	}
	err := createOrReplace(ctx, c.Client, vwc, &admissionregistrationv1.ValidatingWebhookConfiguration{}, func(existing *admissionregistrationv1.ValidatingWebhookConfiguration) {
		existing.Webhooks = vwc.Webhooks
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
