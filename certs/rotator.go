package certs

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
)

// Options configure the built-in mode.
type Options struct {
	// Secret contains the CA, the CA bundle and the serving certificate. It is
	// the one source of truth every replica converges on.
	Secret types.NamespacedName

	// Hosts are the names the API server calls the webhook by: the
	// Service's DNS names, or IP addresses.
	Hosts []string

	// CABundle is written into these objects' clientConfig.caBundle.
	ValidatingWebhookConfigurations []string
	MutatingWebhookConfigurations   []string
	CRDs                            []string

	// CAValidity and ServingValidity are certificate lifetimes; each is
	// renewed after two thirds of it.
	CAValidity      time.Duration
	ServingValidity time.Duration

	// PropagationDelay is how long a new CA bundle is given to reach the API
	// server, and a new serving certificate every replica, before the next
	// rotation step. It must exceed SyncInterval.
	PropagationDelay time.Duration

	// SyncInterval is how often the Secret is read back, so that a replica
	// picks up what another one wrote.
	SyncInterval time.Duration
}

// Defaults for Options left zero.
const (
	DefaultCAValidity       = 3 * 365 * 24 * time.Hour
	DefaultServingValidity  = 90 * 24 * time.Hour
	DefaultPropagationDelay = 5 * time.Minute
	DefaultSyncInterval     = time.Minute
)

// retryAfterError is how soon a failed sync is tried again.
const retryAfterError = 2 * time.Second

// Rotator is the built-in mode: it keeps the Secret's CA and serving
// certificate current, publishes the CA bundle, and serves the certificate.
// Several replicas can run it at once: every write to the Secret is a
// compare-and-swap on its resourceVersion, so they all converge on one CA.
type Rotator struct {
	servingCert
	client client.Client
	opts   Options
	policy policy
	now    func() time.Time

	mu     sync.Mutex // serializes syncs and guards force
	force  forced
	synced atomic.Bool
}

// NewRotator builds a Rotator that talks to the API server at cfg.
func NewRotator(cfg *rest.Config, opts Options) (*Rotator, error) {
	if opts.Secret.Name == "" || opts.Secret.Namespace == "" {
		return nil, errors.New("certs: the Secret's namespace and name are required")
	}
	if len(opts.Hosts) == 0 {
		return nil, errors.New("certs: at least one host is required")
	}
	setDefault(&opts.CAValidity, DefaultCAValidity)
	setDefault(&opts.ServingValidity, DefaultServingValidity)
	setDefault(&opts.PropagationDelay, DefaultPropagationDelay)
	setDefault(&opts.SyncInterval, DefaultSyncInterval)
	if opts.PropagationDelay <= opts.SyncInterval {
		return nil, fmt.Errorf("certs: the propagation delay (%s) must exceed the sync interval (%s)", opts.PropagationDelay, opts.SyncInterval)
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return nil, err
	}
	return &Rotator{
		client: c,
		opts:   opts,
		policy: policy{
			hosts:            opts.Hosts,
			caName:           opts.Secret.Name + "-ca",
			caValidity:       opts.CAValidity,
			servingValidity:  opts.ServingValidity,
			propagationDelay: opts.PropagationDelay,
		},
		now: time.Now,
	}, nil
}

var scheme = func() *runtime.Scheme {
	s := runtime.NewScheme()
	utilruntime.Must(corev1.AddToScheme(s))
	utilruntime.Must(admissionregistrationv1.AddToScheme(s))
	utilruntime.Must(apiextensionsv1.AddToScheme(s))
	return s
}()

func setDefault(d *time.Duration, def time.Duration) {
	if *d == 0 {
		*d = def
	}
}

// Start syncs at once and then every SyncInterval until ctx ends.
func (r *Rotator) Start(ctx context.Context) error {
	log := logf.FromContext(ctx).WithName("certs")
	syncEvery(ctx, r.opts.SyncInterval, r.Sync, func(err error) {
		log.Error(err, "syncing the webhook certificate", "secret", r.opts.Secret)
	})
	return nil
}

// syncEvery calls sync at once and then every interval until ctx ends; after
// a failure, which it hands to failed, it tries again after retryAfterError.
func syncEvery(ctx context.Context, interval time.Duration, sync func(context.Context) error, failed func(error)) {
	for {
		wait := interval
		if err := sync(ctx); err != nil {
			failed(err)
			wait = retryAfterError
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
	}
}

// NeedLeaderElection is false: every replica serves, so every replica needs
// the certificate.
func (*Rotator) NeedLeaderElection() bool { return false }

// ReadyCheck fails until a certificate is loaded and the CA bundle has been
// published once.
func (r *Rotator) ReadyCheck(req *http.Request) error {
	if !r.synced.Load() {
		return errNotLoaded
	}
	return r.servingCert.ReadyCheck(req)
}

// RotateCA stages a new CA now; the serving certificate and the bundle follow
// over the next syncs, PropagationDelay apart.
func (r *Rotator) RotateCA(ctx context.Context) error {
	return r.forceSync(ctx, forced{ca: true})
}

// RotateServing issues a new serving certificate now, unless the signing CA
// is still propagating, in which case the request is kept and the
// certificate comes with the first sync after the CA is trusted.
func (r *Rotator) RotateServing(ctx context.Context) error {
	return r.forceSync(ctx, forced{serving: true})
}

func (r *Rotator) forceSync(ctx context.Context, f forced) error {
	r.mu.Lock()
	r.force.ca = r.force.ca || f.ca
	r.force.serving = r.force.serving || f.serving
	r.mu.Unlock()
	return r.Sync(ctx)
}

// Sync brings the Secret up to date, publishes its CA bundle and loads its
// serving certificate.
func (r *Rotator) Sync(ctx context.Context) error {
	r.mu.Lock()
	defer r.mu.Unlock()

	var current material
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		var err error
		current, err = r.syncSecret(ctx)
		return err
	})
	if err != nil {
		return err
	}
	r.force = r.policy.deferred(r.force, current, r.now())
	if err := r.publish(ctx, encodeBundle(current.trusted)); err != nil {
		return err
	}
	if err := r.load(current.serving); err != nil {
		return err
	}
	r.synced.Store(true)
	return nil
}

// syncSecret reads the Secret, creating it when missing, and writes the next
// material when the policy changes it. A conflict means another replica
// wrote first; the caller retries from its version.
func (r *Rotator) syncSecret(ctx context.Context) (material, error) {
	secret := &corev1.Secret{}
	err := r.client.Get(ctx, r.opts.Secret, secret)
	if apierrors.IsNotFound(err) {
		next, _, err := r.policy.next(material{}, r.now(), forced{})
		if err != nil {
			return material{}, err
		}
		secret = &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Namespace: r.opts.Secret.Namespace, Name: r.opts.Secret.Name},
			Type:       corev1.SecretTypeTLS,
			Data:       next.data(),
		}
		if err := r.client.Create(ctx, secret); apierrors.IsAlreadyExists(err) {
			// Another replica created it first: adopt its CA on the retry.
			return material{}, apierrors.NewConflict(corev1.Resource("secrets"), secret.Name, err)
		} else if err != nil {
			return material{}, err
		}
		return next, nil
	}
	if err != nil {
		return material{}, err
	}
	next, changed, err := r.policy.next(readMaterial(secret.Data), r.now(), r.force)
	if err != nil || !changed {
		return next, err
	}
	secret.Data = next.data()
	return next, r.client.Update(ctx, secret)
}

// publish writes the CA bundle into every configured object that lacks it.
// A missing object is skipped: it may be installed after the server starts,
// and the next sync fills it in.
func (r *Rotator) publish(ctx context.Context, bundle []byte) error {
	targets := []struct {
		names  []string
		object func() client.Object
	}{
		{r.opts.ValidatingWebhookConfigurations, func() client.Object { return &admissionregistrationv1.ValidatingWebhookConfiguration{} }},
		{r.opts.MutatingWebhookConfigurations, func() client.Object { return &admissionregistrationv1.MutatingWebhookConfiguration{} }},
		{r.opts.CRDs, func() client.Object { return &apiextensionsv1.CustomResourceDefinition{} }},
	}
	for _, t := range targets {
		for _, name := range t.names {
			if err := r.patch(ctx, t.object(), name, func(o client.Object) bool {
				changed := false
				for _, field := range caBundleFields(o) {
					changed = setBundle(field, bundle) || changed
				}
				return changed
			}); err != nil {
				return err
			}
		}
	}
	return nil
}

// caBundleFields points at the clientConfig.caBundle of every webhook in a
// webhook configuration, or of a CRD's conversion webhook when it has one.
func caBundleFields(o client.Object) []*[]byte {
	var fields []*[]byte
	switch o := o.(type) {
	case *admissionregistrationv1.ValidatingWebhookConfiguration:
		for i := range o.Webhooks {
			fields = append(fields, &o.Webhooks[i].ClientConfig.CABundle)
		}
	case *admissionregistrationv1.MutatingWebhookConfiguration:
		for i := range o.Webhooks {
			fields = append(fields, &o.Webhooks[i].ClientConfig.CABundle)
		}
	case *apiextensionsv1.CustomResourceDefinition:
		if conv := o.Spec.Conversion; conv != nil && conv.Webhook != nil && conv.Webhook.ClientConfig != nil {
			fields = append(fields, &conv.Webhook.ClientConfig.CABundle)
		}
	}
	return fields
}

// patch reads the named object, applies change, and writes it back when
// change reports a difference, retrying on conflicts.
func (r *Rotator) patch(ctx context.Context, obj client.Object, name string, change func(client.Object) bool) error {
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := r.client.Get(ctx, types.NamespacedName{Name: name}, obj); err != nil {
			return err
		}
		if !change(obj) {
			return nil
		}
		return r.client.Update(ctx, obj)
	})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("publishing the CA bundle to %T %s: %w", obj, name, err)
	}
	return nil
}

func setBundle(field *[]byte, bundle []byte) bool {
	if string(*field) == string(bundle) {
		return false
	}
	*field = bundle
	return true
}
