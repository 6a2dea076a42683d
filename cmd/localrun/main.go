// Command localrun runs the whole of lbregistrar on this machine, with no
// cluster and no OCI account (make run): a real kube-apiserver and etcd, the
// OCI load balancer emulator with a classic load balancer and a network load
// balancer, and `lbregistrar serve` (webhooks with built-in certificates,
// conversion, the controller). It creates Nodes, Services and
// EndpointSlices, applies the samples with kubectl, and shows what is
// registered in each backend set until interrupted.
package main

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	_ "embed"
	"encoding/pem"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/peppy-ratio/lbregistrar/api/v1beta1"
	"github.com/peppy-ratio/lbregistrar/test/kube"
	"github.com/peppy-ratio/lbregistrar/test/ociemu"
)

//go:embed seed.yaml
var seedYAML []byte

// samples are applied in this order: the original two-resources-on-one-load-
// balancer example (v1alpha1, network load balancer) and v1beta1 resources
// (classic load balancer): node ports, a fixed port, pods, and the last
// signed in with workload identity.
var samples = []string{
	"config/samples/v1alpha1_two_resources_one_lb.yaml",
	"config/samples/v1beta1_multi_service.yaml",
	"config/samples/v1beta1_fixed_node_port.yaml",
	"config/samples/v1beta1_pod_targets.yaml",
	"config/samples/v1beta1_workload_identity.yaml",
}

const (
	apiKeySecret    = "oci-api-key"
	apiKeyNamespace = "lbregistrar-system"
)

func main() {
	check := flag.Bool("check", false, "exit once every sample is registered and a request went through a load balancer (for tests)")
	timeout := flag.Duration("timeout", 5*time.Minute, "with -check, how long to wait")
	latency := flag.Duration("work-request-latency", time.Second, "how long the emulator's work requests take")
	binary := flag.String("lbregistrar", "bin/lbregistrar", "the lbregistrar binary to run, relative to the repository root unless absolute")
	flag.Parse()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if *check {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, *timeout)
		defer cancel()
	}
	if err := run(ctx, *binary, *check, *latency); err != nil {
		fmt.Fprintln(os.Stderr, "localrun:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, binary string, check bool, latency time.Duration) (err error) {
	root, err := kube.FindRoot()
	if err != nil {
		return err
	}
	say("starting kube-apiserver and etcd")
	cluster, err := kube.StartEnv(ctx, kube.Options{Root: root, Bare: true})
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, cluster.Stop()) }()

	say("starting the OCI emulator")
	emu, err := ociemu.Start(ociemu.Options{WorkRequestLatency: latency, Region: "ap-tokyo-1", StandIns: podStandIns()})
	if err != nil {
		return err
	}
	defer emu.Close()
	var seed ociemu.Seed
	if err := yaml.UnmarshalStrict(seedYAML, &seed); err != nil {
		return fmt.Errorf("seed.yaml: %w", err)
	}
	if err := emu.SeedState(seed); err != nil {
		return err
	}

	sampleTexts, fingerprint, err := prepareCredentials(ctx, root, cluster, emu)
	if err != nil {
		return err
	}

	// The log outlives the run, for reading after Ctrl-C.
	logFile, err := os.CreateTemp("", "lbregistrar-localrun-*.log")
	if err != nil {
		return err
	}
	serveLog := logFile.Name()
	if !filepath.IsAbs(binary) {
		binary = filepath.Join(root, binary)
	}
	// The CA OKE workload identity's exchange (the emulator's) is trusted with.
	identityCA, err := os.CreateTemp("", "lbregistrar-localrun-*-oci-ca.pem")
	if err != nil {
		return err
	}
	defer os.Remove(identityCA.Name())
	_, err = identityCA.Write(emu.CACertPEM())
	if err = errors.Join(err, identityCA.Close()); err != nil {
		return err
	}
	serve, err := startServe(ctx, binary, cluster, emu, logFile, identityCA.Name())
	if err != nil {
		return err
	}
	defer serve.Stop()

	say("creating Nodes, the istio-ingressgateway Service and its EndpointSlice")
	if err := createWorkload(ctx, cluster.Client); err != nil {
		return err
	}
	stopNodes, err := serveNodes()
	if err != nil {
		return err
	}
	defer stopNodes()

	resources := 0
	for i, text := range sampleTexts {
		resources += strings.Count(text, "\nkind: LBRegistrar")
		say("kubectl apply -f " + samples[i])
		out, stderr, err := cluster.Kubectl(ctx, strings.ReplaceAll(text, "FINGERPRINT", fingerprint), "apply", "-f", "-")
		fmt.Print(indent(out + stderr))
		if err != nil {
			return fmt.Errorf("applying %s: %w", samples[i], err)
		}
	}

	fmt.Printf("\nkubeconfig: %s\n  bin/kubectl --kubeconfig %s get lbregistrars\nlbregistrar log: %s\nlbregistrar metrics: http://%s/metrics, write lanes: http://%s/debug/lanes\nOCI emulator: %s (state at %s/admin/state)\n\n",
		cluster.Kubeconfig, cluster.Kubeconfig, serveLog, serve.MetricsAddr, serve.MetricsAddr, emu.URL(), emu.URL())

	traffic := ""
	tick := time.NewTicker(2 * time.Second)
	defer tick.Stop()
	for {
		view, registered, err := render(ctx, cluster.Client, emu, resources)
		if err != nil {
			return err
		}
		if registered && traffic == "" {
			traffic = sendThroughLoadBalancer(emu, *seed.NetworkLoadBalancers[0].Id)
		}
		fmt.Print("\033[H\033[2J") // a fresh screen each time, like watch
		fmt.Printf("lbregistrar local run, %s (Ctrl-C stops everything)\n\n%s", time.Now().Format(time.TimeOnly), view)
		if traffic != "" {
			fmt.Printf("\nA request through the network load balancer's backend set \"ingress\":\n  %s\n", traffic)
		}
		fmt.Printf("\nkubeconfig: %s\nlbregistrar log: %s\n", cluster.Kubeconfig, serveLog)
		if check && registered && traffic != "" {
			if err := showOperations(serve.MetricsAddr); err != nil {
				return err
			}
			// A check that passed leaves nothing behind, not even the log.
			return os.Remove(serveLog)
		}
		select {
		case <-ctx.Done():
			if check {
				return fmt.Errorf("samples not registered in time: %w (see %s)", ctx.Err(), serveLog)
			}
			return nil
		case <-serve.Done():
			return fmt.Errorf("lbregistrar serve stopped; see %s", serveLog)
		case <-tick.C:
		}
	}
}

func say(msg string) { fmt.Println("==>", msg) }

func get(url string) (string, error) {
	resp, err := http.Get(url)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err == nil && resp.StatusCode != http.StatusOK {
		err = fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return string(body), err
}

func indent(s string) string {
	if s == "" {
		return ""
	}
	return "    " + strings.ReplaceAll(strings.TrimRight(s, "\n"), "\n", "\n    ") + "\n"
}

// prepareCredentials makes an API key, registers its public half with the
// emulator for the user and tenancy the samples name, keeps the private half
// in the Secret the samples point at, and returns the samples' text with
// their fingerprint replaced by FINGERPRINT.
func prepareCredentials(ctx context.Context, root string, cluster *kube.Cluster, emu *ociemu.Emulator) ([]string, string, error) {
	var texts []string
	var key v1beta1.APIKey
	for _, path := range samples {
		data, err := os.ReadFile(filepath.Join(root, path))
		if err != nil {
			return nil, "", err
		}
		var obj v1beta1.LBRegistrar // the apiKey has the same shape in both versions
		if err := yaml.Unmarshal(firstDocument(data), &obj); err != nil {
			return nil, "", fmt.Errorf("%s: %w", path, err)
		}
		text := string(data)
		if obj.Spec.APIKey != nil { // not signed in with workload identity
			key = *obj.Spec.APIKey
			text = strings.ReplaceAll(text, key.Fingerprint, "FINGERPRINT")
		}
		texts = append(texts, text)
	}

	private, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return nil, "", err
	}
	publicDER, err := x509.MarshalPKIXPublicKey(&private.PublicKey)
	if err != nil {
		return nil, "", err
	}
	user, err := emu.RegisterPublicKey(key.Tenancy, key.User, pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: publicDER}))
	if err != nil {
		return nil, "", err
	}
	if err := cluster.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: apiKeyNamespace}}); err != nil {
		return nil, "", err
	}
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: apiKeyNamespace, Name: apiKeySecret},
		Data: map[string][]byte{
			key.PrivateKey.SecretKeyRef.Key: pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(private)}),
		},
	}
	if err := cluster.Client.Create(ctx, secret); err != nil {
		return nil, "", err
	}
	return texts, user.Fingerprint, nil
}

// firstDocument is data's first LBRegistrar.
func firstDocument(data []byte) []byte {
	for _, doc := range strings.Split(string(data), "\n---") {
		if strings.Contains(doc, "kind: LBRegistrar") {
			return []byte(doc)
		}
	}
	return data
}

// startServe installs the CRD and the validating webhooks and the RBAC of
// config/, starts lbregistrar serve on local ports it picks as the service
// account that RBAC is for (so the run proves it is enough), points the
// webhooks at it, lets it write the CA bundle into both, and waits until the
// API server trusts it. Until serve listens, the webhooks point at
// kube.UnreachableURL. Resources signing in with workload identity reach
// the emulator's token exchange, trusted with identityCA.
func startServe(ctx context.Context, binary string, cluster *kube.Cluster, emu *ociemu.Emulator, logFile *os.File, identityCA string) (*kube.ServeProcess, error) {
	defer logFile.Close() // the process has its own descriptor
	logPath := logFile.Name()
	// OKE workload identity's token exchange, which believes the tokens
	// this API server vouches for, as OKE's does its cluster's.
	identityHost, err := emu.ServeWorkloadIdentity(kube.TokenReviewer(cluster.Client))
	if err != nil {
		return nil, err
	}
	say("installing the CRD and webhooks")
	if err := cluster.PointWebhooksAt(ctx, kube.UnreachableURL, nil); err != nil {
		return nil, err
	}
	kubeconfig, err := cluster.ServiceAccountKubeconfig(ctx)
	if err != nil {
		return nil, err
	}
	// The ServiceAccount config/samples/v1beta1_workload_identity.yaml signs in as.
	if err := cluster.AllowWorkloadIdentity(ctx, "edge-writer"); err != nil {
		return nil, err
	}

	say("starting lbregistrar serve (log: " + logPath + ")")
	serve := &kube.ServeProcess{Env: []string{
		// The OCI SDK's workload identity provider reads these.
		"OCI_RESOURCE_PRINCIPAL_REGION=ap-tokyo-1",
		"OCI_KUBERNETES_SERVICE_ACCOUNT_CERT_PATH=" + identityCA,
	}}
	err = serve.Start(binary, kubeconfig, logFile,
		"--workload-identity-host", identityHost,
		"--workload-identity-ca-file", identityCA,
		"--leader-elect",
		"--webhook-host", "127.0.0.1",
		"--secret-namespaces", apiKeyNamespace,
		"--oci-loadbalancer-endpoint", emu.URL(),
		"--oci-networkloadbalancer-endpoint", emu.URL(),
		"--oci-core-endpoint", emu.URL(),
		"--drain-period", "5s",
		"--node-drain-period", "5s",
		// Health is read on each resync: often enough for the live view to
		// follow the emulator's health checks.
		"--resync-period", "10s",
	)
	if err != nil {
		return nil, err
	}
	if err := serve.WaitListening(ctx); err != nil {
		serve.Stop()
		return nil, fmt.Errorf("%w (see %s)", err, logPath)
	}
	say("pointing the webhooks at " + serve.URL())
	if err := cluster.PointWebhooksAt(ctx, serve.URL(), nil); err != nil {
		serve.Stop()
		return nil, err
	}
	if err := serve.WaitReady(ctx); err != nil {
		serve.Stop()
		return nil, fmt.Errorf("waiting for lbregistrar serve to be ready: %w (see %s)", err, logPath)
	}
	for !caBundleWritten(ctx, cluster) {
		select {
		case <-ctx.Done():
			serve.Stop()
			return nil, fmt.Errorf("waiting for the CA bundle in the CRD and webhooks: %w (see %s)", ctx.Err(), logPath)
		case <-time.After(200 * time.Millisecond):
		}
	}
	return serve, nil
}

func caBundleWritten(ctx context.Context, cluster *kube.Cluster) bool {
	caBundles, err := cluster.CABundles(ctx)
	if err != nil {
		return false
	}
	for _, b := range caBundles {
		if len(b) == 0 {
			return false
		}
	}
	return true
}
