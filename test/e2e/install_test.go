package e2e

import (
	"context"
	"fmt"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/peppy-ratio/lbregistrar/api/v1beta1"
	"github.com/peppy-ratio/lbregistrar/certs"
	"github.com/peppy-ratio/lbregistrar/test/eventually"
	"github.com/peppy-ratio/lbregistrar/test/kube"
	"github.com/peppy-ratio/lbregistrar/test/ociemu"
)

// installBound is how long the install may take, from starting the
// replicas to every resource Ready.
const installBound = 90 * time.Second

// Installing over the original operator as its users will: its CRD and
// v1alpha1 objects stored, their backends registered as it left them; then
// config/default's CRD and validating webhook configuration with no CA
// bundle, and the Deployment's two replicas started at the same moment
// behind one address, as its pods are behind the webhook Service. Listing
// the stored objects needs the conversion webhook, so no replica may wait
// for its caches before it serves a certificate: both become ready, every
// resource becomes Ready, and OCI sees no write, in both certificate modes.
func TestInstallOverTheOriginalOperator(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{"builtin", "cert-manager"} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			c := kube.Start(t, kube.Options{Bare: true})
			ctx := testContext(t)
			emu := leftByTheOriginalOperator(t, c)

			service := newServiceProxy(t)
			url := "https://" + service.Addr()
			pointWebhooksAt(t, c, url, nil)
			if mode == "cert-manager" {
				if err := c.InstallCertManagerCRDs(ctx); err != nil {
					t.Fatal(err)
				}
				kubectl(t, c, "", "apply", "-k", c.Root+"/config/certmanager")
			}

			args := []string{"--cert-mode=" + mode, "--webhook-host=127.0.0.1", "--leader-elect",
				"--secret-namespaces=" + kube.Namespace,
				"--oci-loadbalancer-endpoint=" + emu.URL(), "--oci-networkloadbalancer-endpoint=" + emu.URL(), "--oci-core-endpoint=" + emu.URL()}
			replicas := []serveProcess{newServeProcess(), newServeProcess()}
			// Started back to back, so neither finds what the other made.
			started := time.Now()
			for _, r := range replicas {
				r.launch(t, c.Kubeconfig, args...)
			}
			for _, r := range replicas {
				r.waitListening(t)
				service.AddBackend(r.WebhookAddr)
			}

			if mode == "cert-manager" {
				ca, err := certs.NewCA("lbregistrar-ca", time.Now(), 24*time.Hour)
				if err != nil {
					t.Fatal(err)
				}
				issueAsCertManager(t, c, ca)
				// cainjector's part: the CA into the webhook configuration and the CRD.
				pointWebhooksAt(t, c, url, ca.CertPEM)
			}

			bounded, cancel := context.WithDeadline(ctx, started.Add(installBound))
			defer cancel()
			for i, r := range replicas {
				if err := r.WaitReady(bounded); err != nil {
					t.Fatalf("replica %d not ready %s after it started: %v", i, installBound, err)
				}
			}
			kubectl(t, c, "", "get", "lbregistrars.v1beta1.nodes.peppy-ratio.dev", "-o", "name")
			waitAllReady(t, c, 4, time.Until(started.Add(installBound)))
			t.Logf("both replicas ready and every resource Ready %s after the replicas started", time.Since(started).Round(time.Millisecond))

			if writes := emu.Counters().Writes; len(writes) > 0 {
				t.Errorf("OCI writes during the takeover: %v", writes)
			}
			for i, r := range replicas {
				if code := r.Readyz(); code != http.StatusOK {
					t.Errorf("replica %d: /readyz %d", i, code)
				}
			}
		})
	}
}

// clusterWithWorkload is an API server of the test's own with lbregistrar's
// namespace and the nodes and gateway Service of createWorkload, and an
// emulator with the load balancers of make run (cmd/localrun/seed.yaml),
// whose work requests take latency.
func clusterWithWorkload(t *testing.T, latency time.Duration) (*kube.Cluster, *ociemu.Emulator) {
	t.Helper()
	c := kube.Start(t, kube.Options{Bare: true})
	emu := seededEmulator(t, c.Root+"/cmd/localrun/seed.yaml", latency)
	kubectl(t, c, "", "create", "namespace", kube.Namespace)
	createWorkload(t, c)
	return c, emu
}

// seededEmulator is an emulator with the load balancers of a seed file,
// whose work requests take latency, in ap-tokyo-1: the region the seed
// files' and manifests' OCIDs name.
func seededEmulator(t *testing.T, seedFile string, latency time.Duration) *ociemu.Emulator {
	t.Helper()
	return ociemu.StartSeeded(t, seedFile, ociemu.Options{Region: "ap-tokyo-1", WorkRequestLatency: latency})
}

// apiKeyFields are the lines of an API key that name its user, tenancy and fingerprint.
var apiKeyFields = regexp.MustCompile(`(?m)^(\s+)(user|tenancy|fingerprint): .*$`)

// apiKeyFor registers a new API key with the emulator, keeps its private
// half in the Secret oci-api-key/private-key of kube.Namespace (the one
// old-operator-objects.yaml and the samples name), and returns objects with
// that key's user, tenancy and fingerprint in every API key.
func apiKeyFor(t testing.TB, c *kube.Cluster, emu *ociemu.Emulator, objects string) string {
	t.Helper()
	key, err := emu.NewAPIKey()
	if err != nil {
		t.Fatal(err)
	}
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: kube.Namespace, Name: "oci-api-key"},
		Data:       map[string][]byte{"private-key": key.PrivateKeyPEM},
	}
	if err := c.Client.Create(testContext(t), secret); err != nil {
		t.Fatal(err)
	}
	values := map[string]string{"user": key.User.User, "tenancy": key.Tenancy, "fingerprint": strconv.Quote(key.Fingerprint)}
	return apiKeyFields.ReplaceAllStringFunc(objects, func(line string) string {
		m := apiKeyFields.FindStringSubmatch(line)
		return m[1] + m[2] + ": " + values[m[2]]
	})
}

// createWorkload creates the nodes and the gateway Service of
// old-operator-backends.yaml, with the gateway's one endpoint on node-a.
func createWorkload(t *testing.T, c *kube.Cluster) {
	t.Helper()
	ctx := testContext(t)
	addNode(t, c, "node-a", "10.0.0.1")
	addNode(t, c, "node-b", "10.0.0.2")
	if err := c.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "istio-system"}}); err != nil {
		t.Fatal(err)
	}
	ports := []corev1.ServicePort{
		{Name: "https", Port: 443, TargetPort: intstr.FromInt32(8443), NodePort: 30443},
		{Name: "http2", Port: 80, TargetPort: intstr.FromInt32(8080), NodePort: 30080},
	}
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "istio-system", Name: "istio-ingressgateway"},
		Spec:       corev1.ServiceSpec{Type: corev1.ServiceTypeNodePort, Selector: map[string]string{"app": "gateway"}, Ports: ports},
	}
	if err := c.Client.Create(ctx, svc); err != nil {
		t.Fatal(err)
	}
	slice := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Namespace: "istio-system", Name: "istio-ingressgateway-a",
			Labels: map[string]string{discoveryv1.LabelServiceName: "istio-ingressgateway"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints: []discoveryv1.Endpoint{{
			Addresses:  []string{"10.244.0.10"},
			Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)},
			NodeName:   ptr.To("node-a"),
		}},
	}
	for _, p := range ports {
		slice.Ports = append(slice.Ports, discoveryv1.EndpointPort{Name: ptr.To(p.Name), Port: ptr.To(p.TargetPort.IntVal)})
	}
	if err := c.Client.Create(ctx, slice); err != nil {
		t.Fatal(err)
	}
}

// addNode creates a Ready node with one InternalIP.
func addNode(t testing.TB, c *kube.Cluster, name, ip string) {
	t.Helper()
	ctx := testContext(t)
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.NodeSpec{ProviderID: "oci://ocid1.instance.oc1.ap-tokyo-1." + name}} // as OKE writes it
	if err := c.Client.Create(ctx, node); err != nil {
		t.Fatal(err)
	}
	node.Status = corev1.NodeStatus{
		Addresses:  []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: ip}},
		Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}},
	}
	if err := c.Client.Status().Update(ctx, node); err != nil {
		t.Fatal(err)
	}
}

// waitAllReady waits until want LBRegistrars are Ready for their current
// generation, each with an ownership record.
func waitAllReady(t *testing.T, c *kube.Cluster, want int, within time.Duration) {
	t.Helper()
	waitReady(t, c, want, within, func(string) bool { return true })
}

// waitReady is waitAllReady for the LBRegistrars whose names count.
func waitReady(t testing.TB, c *kube.Cluster, want int, within time.Duration, counts func(name string) bool) {
	t.Helper()
	ctx := testContext(t)
	eventually.Passes(t, within, 250*time.Millisecond, func() error {
		var list v1beta1.LBRegistrarList
		if err := c.Client.List(ctx, &list); err != nil {
			return err
		}
		var notReady []string
		counted := 0
		for _, r := range list.Items {
			if !counts(r.Name) {
				continue
			}
			counted++
			cond := meta.FindStatusCondition(r.Status.Conditions, v1beta1.ConditionReady)
			switch {
			case cond == nil || cond.Status != metav1.ConditionTrue || cond.ObservedGeneration != r.Generation:
				notReady = append(notReady, fmt.Sprintf("%s: Ready: %+v", r.Name, cond))
			case len(r.Status.BackendSets) == 0:
				notReady = append(notReady, r.Name+": no ownership record")
			}
		}
		if counted != want || len(notReady) > 0 {
			return fmt.Errorf("%d of %d LBRegistrars; not Ready:\n%s", counted, want, strings.Join(notReady, "\n"))
		}
		return nil
	})
}
