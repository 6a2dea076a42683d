// Package kube starts a real kube-apiserver and etcd (controller-runtime's
// envtest, with the binaries `make test-assets` builds into bin/), installs
// the LBRegistrar CRD with its conversion webhook and the validating webhooks
// exactly as config/ ships them but pointed at a webhook server running in
// this process over TLS, and hands back clients and a kubeconfig for
// bin/kubectl.
//
// Tests call Start; a command (make run) calls StartEnv and Stop.
package kube

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/peppy-ratio/lbregistrar/api"
	"github.com/peppy-ratio/lbregistrar/api/v1alpha1"
)

// Names of the objects config/ ships, as the tests and the harness use them.
const (
	Namespace         = "lbregistrar-system"
	CRDName           = "lbregistrars.nodes.peppy-ratio.dev"
	ValidatingWebhook = "lbregistrar-validating"
	MutatingWebhook   = "lbregistrar-mutating"
	CertSecret        = "lbregistrar-webhook-tls"
)

// Options configure a Cluster.
type Options struct {
	// Root is the repository root; found from the working directory when empty.
	Root string

	// Bare starts only the API server: no namespace, webhooks or CRD. Call
	// InstallWebhooks later.
	Bare bool

	// Webhooks configure the in-process webhook server.
	Webhooks WebhookOptions

	// APIServerFlags are set on kube-apiserver's command line, e.g.
	// admission-control-config-file.
	APIServerFlags map[string]string

	// QuickLists has etcd report its progress to the API server's watch
	// cache every 10 ms, so that a list is answered in about 10 ms rather
	// than at the next progress request (every 100 ms). Tests that list
	// again and again while they wait want it; it costs the API server
	// and etcd CPU all the time, so benchmarks leave it off.
	QuickLists bool
}

// Cluster is a running API server.
type Cluster struct {
	// Config is an admin connection; Client uses it with a scheme that knows
	// core, apiextensions and LBRegistrar types.
	Config *rest.Config
	Client client.Client
	Scheme *runtime.Scheme

	// Kubeconfig is a kubeconfig file for bin/kubectl.
	Kubeconfig string

	// Root is the repository root.
	Root string

	// Webhooks is the webhook server, once started.
	Webhooks *Webhooks

	env *envtest.Environment
	dir string
}

// NewScheme knows core, apiextensions and every LBRegistrar version.
func NewScheme() *runtime.Scheme {
	s := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(s))
	utilruntime.Must(apiextensionsv1.AddToScheme(s))
	utilruntime.Must(api.AddToScheme(s))
	return s
}

// StartEnv starts etcd and kube-apiserver and, unless o.Bare, the webhook
// server, the namespace, the validating webhooks and the CRD. Stop it with
// Stop.
func StartEnv(ctx context.Context, o Options) (_ *Cluster, err error) {
	root := o.Root
	if root == "" {
		if root, err = FindRoot(); err != nil {
			return nil, err
		}
	}
	dir, err := os.MkdirTemp("", "lbregistrar-kube-")
	if err != nil {
		return nil, err
	}
	assets := os.Getenv("KUBEBUILDER_ASSETS")
	if assets == "" {
		assets = filepath.Join(root, "bin")
	}
	env := &envtest.Environment{
		BinaryAssetsDirectory:    assets,
		ControlPlaneStartTimeout: 2 * time.Minute,
		ControlPlaneStopTimeout:  time.Minute,
	}
	for flag, value := range o.APIServerFlags {
		env.ControlPlane.GetAPIServer().Configure().Set(flag, value)
	}
	if o.QuickLists {
		// A list the API server answers from its watch cache waits until
		// the cache has caught up with etcd; with writes all around, that
		// is the next progress request, sent every 100 ms (k8s.io/apiserver
		// pkg/storage/cacher/progress, progressRequestPeriod). With etcd
		// reporting its progress every 10 ms, a list takes about 10 ms,
		// not 30 to 100, and stays as consistent.
		env.ControlPlane.Etcd = &envtest.Etcd{}
		env.ControlPlane.Etcd.Configure().Set("watch-progress-notify-interval", "10ms")
	}
	cfg, err := env.Start()
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, fmt.Errorf("starting kube-apiserver and etcd from %s (run `make test-assets`): %w", assets, err)
	}
	c := &Cluster{Config: cfg, Scheme: NewScheme(), Root: root, env: env, dir: dir}
	defer func() {
		if err != nil {
			_ = c.Stop()
		}
	}()
	// Many tests share one server; the defaults throttle them.
	cfg.QPS, cfg.Burst = 500, 1000
	if c.Client, err = client.New(cfg, client.Options{Scheme: c.Scheme}); err != nil {
		return nil, err
	}
	c.Kubeconfig = filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(c.Kubeconfig, env.KubeConfig, 0o600); err != nil {
		return nil, err
	}
	if !o.Bare {
		if err := c.InstallWebhooks(ctx, o.Webhooks); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// Stop stops the webhook server, the API server and etcd, and removes the
// temporary files.
func (c *Cluster) Stop() error {
	var errs []error
	if c.Webhooks != nil {
		errs = append(errs, c.Webhooks.Stop())
	}
	errs = append(errs, c.env.Stop(), os.RemoveAll(c.dir))
	return errors.Join(errs...)
}

// InstallWebhooks creates the namespace, installs the validating webhook
// configuration and the CRD (replacing an older CRD of the same name)
// pointed at a webhook server started here, lets its certificate source
// publish the CA bundle into them, as lbregistrar serve does, and waits until
// the API server admits and converts through it.
func (c *Cluster) InstallWebhooks(ctx context.Context, o WebhookOptions) error {
	if err := c.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: Namespace}}); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	w, err := StartWebhooks(ctx, c.Config, c.Scheme, o, func(url string) error { return c.PointWebhooksAt(ctx, url, nil) })
	if err != nil {
		return err
	}
	c.Webhooks = w
	return c.WaitAdmitting(ctx)
}

// WaitAdmitting waits until the API server takes a v1alpha1 LBRegistrar in a
// dry run, which needs the validating webhook, the conversion webhook (to
// the stored version and back) and the CA bundles they are called with.
func (c *Cluster) WaitAdmitting(ctx context.Context) error {
	probe := &v1alpha1.LBRegistrar{
		ObjectMeta: metav1.ObjectMeta{Name: "lbregistrar-admission-probe"},
		Spec: v1alpha1.LBRegistrarSpec{
			LoadBalancerID: "ocid1.loadbalancer.oc1.ap-tokyo-1.aaaaaaaaprobe",
			BackendSetName: "probe",
			NodePort:       30000,
			APIKey: v1alpha1.APIKeySpec{
				User:        "ocid1.user.oc1..aaaaaaaaprobe",
				Fingerprint: "12:34:56:78:90:ab:cd:ef:12:34:56:78:90:ab:cd:ef",
				Tenancy:     "ocid1.tenancy.oc1..aaaaaaaaprobe",
				Region:      "ap-tokyo-1",
				PrivateKey: v1alpha1.SecretKeySpec{
					Namespace:    Namespace,
					SecretKeyRef: v1alpha1.SecretKeyRef{Name: "oci-api-key", Key: "private-key"},
				},
			},
		},
	}
	var last error
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		last = c.Client.Create(ctx, probe.DeepCopy(), client.DryRunAll)
		return last == nil, nil
	})
	if err != nil {
		return fmt.Errorf("the API server does not admit LBRegistrars through the webhooks: %w (last: %w)", err, last)
	}
	return nil
}

// InstallPlainCRD installs the CRD from config/crd/bases as it is there,
// without the conversion webhook, for a Bare cluster that serves v1beta1
// alone, and waits until it is served.
func (c *Cluster) InstallPlainCRD() error {
	crds := envtest.CRDInstallOptions{Paths: []string{filepath.Join(c.Root, "config/crd/bases")}, ErrorIfPathMissing: true}
	_, err := envtest.InstallCRDs(c.Config, crds)
	return err
}

// InstallCRD creates or replaces the CRD from config/crd/bases with its
// conversion webhook at url and trusting caBundle, and waits until it is
// served.
func (c *Cluster) InstallCRD(ctx context.Context, url string, caBundle []byte) error {
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := readYAML(filepath.Join(c.Root, "config/crd/bases", "nodes.peppy-ratio.dev_lbregistrars.yaml"), crd); err != nil {
		return err
	}
	var patch struct {
		Spec struct {
			Conversion *apiextensionsv1.CustomResourceConversion `json:"conversion"`
		} `json:"spec"`
	}
	if err := readYAML(filepath.Join(c.Root, "config/crd/conversion-webhook-patch.yaml"), &patch); err != nil {
		return err
	}
	conversion := patch.Spec.Conversion
	conversion.Webhook.ClientConfig = urlClientConfig(url, *conversion.Webhook.ClientConfig.Service.Path, caBundle)
	crd.Spec.Conversion = conversion

	err := createOrReplace(ctx, c.Client, crd, &apiextensionsv1.CustomResourceDefinition{}, func(existing *apiextensionsv1.CustomResourceDefinition) {
		if old := existing.Spec.Conversion; caBundle == nil && old != nil && old.Webhook != nil && old.Webhook.ClientConfig != nil {
			conversion.Webhook.ClientConfig.CABundle = old.Webhook.ClientConfig.CABundle
		}
		existing.Spec = crd.Spec
	})
	if err != nil {
		return fmt.Errorf("installing the CRD: %w", err)
	}
	return c.waitEstablished(ctx)
}

// createOrReplace creates obj, or when an object of its name exists, reads
// it into existing, gives it obj's content with replace and updates it,
// again from a fresh read when another writer (lbregistrar serve publishing
// its CA bundle) came first.
func createOrReplace[T client.Object](ctx context.Context, c client.Client, obj, existing T, replace func(existing T)) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		err := c.Get(ctx, client.ObjectKeyFromObject(obj), existing)
		if apierrors.IsNotFound(err) {
			return c.Create(ctx, obj)
		}
		if err != nil {
			return err
		}
		replace(existing)
		return c.Update(ctx, existing)
	})
}

func (c *Cluster) waitEstablished(ctx context.Context) error {
	return wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := c.Client.Get(ctx, client.ObjectKey{Name: CRDName}, crd); err != nil {
			return false, err
		}
		for _, cond := range crd.Status.Conditions {
			if cond.Type == apiextensionsv1.Established && cond.Status == apiextensionsv1.ConditionTrue {
				return true, nil
			}
		}
		return false, nil
	})
}

// Stored returns the bytes etcd has for key (e.g.
// /registry/nodes.peppy-ratio.dev/lbregistrars/NAME), read through etcd's
// JSON gateway rather than the API server, whose watch cache may have an
// object already converted.
func (c *Cluster) Stored(ctx context.Context, key string) ([]byte, error) {
	body, err := json.Marshal(map[string][]byte{"key": []byte(key)})
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.env.ControlPlane.Etcd.URL.String()+"/v3/kv/range", bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer func() { _ = resp.Body.Close() }()
	var result struct {
		KVs []struct {
			Value []byte `json:"value"`
		} `json:"kvs"`
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("etcd range %s: %s", key, resp.Status)
	}
	if err := json.NewDecoder(resp.Body).Decode(&result); err != nil {
		return nil, err
	}
	if len(result.KVs) == 0 {
		return nil, fmt.Errorf("etcd has no %s", key)
	}
	return result.KVs[0].Value, nil
}

// Kubectl runs bin/kubectl against the cluster with stdin as its input.
func (c *Cluster) Kubectl(ctx context.Context, stdin string, args ...string) (stdout, stderr string, err error) {
	// Each cluster has its own discovery cache: kubectl keys its default
	// one (~/.kube/cache) by host and port, and a later cluster on a port an
	// earlier one used would be served that cluster's resources.
	cmd := exec.CommandContext(ctx, filepath.Join(c.Root, "bin", "kubectl"),
		append([]string{"--kubeconfig", c.Kubeconfig, "--cache-dir", filepath.Join(c.dir, "kubectl-cache")}, args...)...)
	cmd.Stdin = strings.NewReader(stdin)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err = cmd.Run()
	return out.String(), errOut.String(), err
}

// FindRoot walks up from the working directory to the repository root.
func FindRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if mod, err := os.ReadFile(filepath.Join(dir, "go.mod")); err == nil && bytes.HasPrefix(mod, []byte("module github.com/peppy-ratio/lbregistrar\n")) {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("kube: not inside the lbregistrar repository")
		}
		dir = parent
	}
}
