// Command localrun runs the whole of lbregistrar on this machine, with no
// cluster and no OCI account (make run): a real kube-apiserver and etcd, the
// OCI load balancer emulator with a classic load balancer and a network load
// balancer, and `lbregistrar serve` (webhooks with built-in certificates,
// conversion, the controller). It creates Nodes, Services and
// EndpointSlices, applies the samples with kubectl, and shows what is
// registered in each backend set until interrupted.
package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	_ "embed"
	"encoding/json"
	"encoding/pem"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/peppy-ratio/lbregistrar/api/v1beta1"
	"github.com/peppy-ratio/lbregistrar/test/kube"
	"github.com/peppy-ratio/lbregistrar/test/ociemu"
)

//go:embed seed.yaml
var seedYAML []byte

// samples are applied in this order: the original two-resources-on-one-load-
// balancer example (v1alpha1, network load balancer) and v1beta1 resources
// (classic load balancer).
var samples = []string{
	"config/samples/v1alpha1_two_resources_one_lb.yaml",
	"config/samples/v1beta1_multi_service.yaml",
	"config/samples/v1beta1_fixed_node_port.yaml",
}

// node is a Kubernetes Node of the local run; its address is a loopback one,
// so the emulator's load balancers can forward real connections to it.
type node struct {
	name, ip string
	labels   map[string]string
}

var nodes = []node{
	{"node-a", "127.0.0.11", map[string]string{"node-role.kubernetes.io/ingress": ""}},
	{"node-b", "127.0.0.12", map[string]string{"node-role.kubernetes.io/ingress": ""}},
	// Excluded as Kubernetes' service controller excludes it: never registered.
	{"node-c", "127.0.0.13", map[string]string{corev1.LabelNodeExcludeBalancers: "true"}},
}

// Service ports of the sample Service and their NodePorts.
var servicePorts = []corev1.ServicePort{
	{Name: "https", Port: 443, TargetPort: intstr.FromInt32(8443), NodePort: 30443},
	{Name: "http2", Port: 80, TargetPort: intstr.FromInt32(8080), NodePort: 30080},
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

func run(ctx context.Context, binary string, check bool, latency time.Duration) error {
	root, err := kube.FindRoot()
	if err != nil {
		return err
	}
	say("starting kube-apiserver and etcd")
	cluster, err := kube.StartEnv(ctx, kube.Options{Root: root, Bare: true})
	if err != nil {
		return err
	}
	defer cluster.Stop()

	say("starting the OCI emulator")
	emu, err := ociemu.Start(ociemu.Options{WorkRequestLatency: latency, Region: "ap-tokyo-1"})
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
	serve, err := startServe(ctx, binary, cluster, emu, logFile)
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

// showOperations prints the write lanes and the registered-backends metric
// of the running lbregistrar, as an operator would look at them.
func showOperations(metricsAddr string) error {
	lanes, err := get("http://" + metricsAddr + "/debug/lanes")
	if err != nil {
		return err
	}
	var compact bytes.Buffer
	if err := json.Compact(&compact, []byte(lanes)); err != nil {
		return fmt.Errorf("/debug/lanes: %w", err)
	}
	fmt.Printf("\nGET /debug/lanes: %s\n", compact.String())
	metrics, err := get("http://" + metricsAddr + "/metrics")
	if err != nil {
		return err
	}
	for _, line := range strings.Split(metrics, "\n") {
		if strings.HasPrefix(line, "lbregistrar_backends_registered{") {
			fmt.Println(line)
		}
	}
	return nil
}

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
		key = obj.Spec.APIKey
		texts = append(texts, strings.ReplaceAll(string(data), key.Fingerprint, "FINGERPRINT"))
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

func firstDocument(data []byte) []byte {
	for _, doc := range strings.Split(string(data), "\n---") {
		if strings.Contains(doc, "kind:") {
			return []byte(doc)
		}
	}
	return data
}

// startServe installs the CRD and the validating webhooks pointed at a local
// address and the RBAC of config/, starts lbregistrar serve there as the
// service account that RBAC is for (so the run proves it is enough), lets it
// write the CA bundle into both, and waits until the API server trusts it.
func startServe(ctx context.Context, binary string, cluster *kube.Cluster, emu *ociemu.Emulator, logFile *os.File) (*kube.ServeProcess, error) {
	defer logFile.Close() // the process has its own descriptor
	logPath := logFile.Name()
	serve, err := kube.NewServeProcess()
	if err != nil {
		return nil, err
	}
	say("installing the CRD and webhooks, pointed at " + serve.URL())
	if err := cluster.PointWebhooksAt(ctx, serve.URL(), nil); err != nil {
		return nil, err
	}
	kubeconfig, err := cluster.ServiceAccountKubeconfig(ctx)
	if err != nil {
		return nil, err
	}

	say("starting lbregistrar serve (log: " + logPath + ")")
	err = serve.Start(binary, kubeconfig, logFile,
		"--leader-elect",
		"--webhook-host", "127.0.0.1",
		"--secret-namespaces", apiKeyNamespace,
		"--oci-loadbalancer-endpoint", emu.URL(),
		"--oci-networkloadbalancer-endpoint", emu.URL(),
		"--drain-period", "5s",
	)
	if err != nil {
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

// createWorkload creates what a cluster would have: Nodes with addresses,
// the Service the samples name, and the EndpointSlice its controller would
// write (nothing here runs Pods).
func createWorkload(ctx context.Context, c client.Client) error {
	for _, n := range nodes {
		obj := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n.name, Labels: n.labels}}
		if err := c.Create(ctx, obj); err != nil {
			return err
		}
		obj.Status = corev1.NodeStatus{
			Addresses:  []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: n.ip}, {Type: corev1.NodeHostName, Address: n.name}},
			Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}},
		}
		if err := c.Status().Update(ctx, obj); err != nil {
			return err
		}
	}
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "istio-system"}}); err != nil {
		return err
	}
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "istio-system", Name: "istio-ingressgateway"},
		Spec: corev1.ServiceSpec{
			Type:     corev1.ServiceTypeNodePort,
			Selector: map[string]string{"app": "istio-ingressgateway"},
			Ports:    servicePorts,
		},
	}
	if err := c.Create(ctx, svc); err != nil {
		return err
	}
	slice := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: "istio-system", Name: "istio-ingressgateway-local",
			Labels: map[string]string{discoveryv1.LabelServiceName: "istio-ingressgateway"},
		},
		AddressType: discoveryv1.AddressTypeIPv4,
	}
	for i, n := range nodes[:2] { // gateway Pods run on the two ingress nodes
		slice.Endpoints = append(slice.Endpoints, discoveryv1.Endpoint{
			Addresses:  []string{"10.244." + strconv.Itoa(i) + ".10"},
			Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true), Serving: ptr.To(true)},
			NodeName:   ptr.To(n.name),
		})
	}
	for _, p := range servicePorts {
		slice.Ports = append(slice.Ports, discoveryv1.EndpointPort{Name: ptr.To(p.Name), Port: ptr.To(p.TargetPort.IntVal), Protocol: ptr.To(corev1.ProtocolTCP)})
	}
	return c.Create(ctx, slice)
}

// serveNodes answers on every node address and NodePort, as kube-proxy and
// the gateway would, so a connection through a load balancer shows where it
// arrived.
func serveNodes() (stop func(), err error) {
	var servers []*http.Server
	stop = func() {
		for _, s := range servers {
			s.Close()
		}
	}
	for _, n := range nodes {
		// The fixed-port sample registers 30443 too, the https NodePort.
		for _, p := range servicePorts {
			addr := net.JoinHostPort(n.ip, strconv.Itoa(int(p.NodePort)))
			l, err := net.Listen("tcp", addr)
			if err != nil {
				stop()
				return nil, err
			}
			name := n.name
			s := &http.Server{ReadHeaderTimeout: 5 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				fmt.Fprintf(w, "served by %s at %s\n", name, addr)
			})}
			servers = append(servers, s)
			go s.Serve(l)
		}
	}
	return stop, nil
}

// sendThroughLoadBalancer opens the emulated network load balancer's
// listener for the "ingress" backend set and sends one request through it.
func sendThroughLoadBalancer(emu *ociemu.Emulator, lb string) string {
	addr, err := emu.Forward(lb, "ingress")
	if err != nil {
		return "forwarding failed: " + err.Error()
	}
	client := http.Client{Timeout: 5 * time.Second}
	resp, err := client.Get("http://" + addr + "/")
	if err != nil {
		return fmt.Sprintf("GET http://%s/ failed: %v", addr, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return fmt.Sprintf("GET http://%s/ -> %s", addr, strings.TrimSpace(string(body)))
}

// render shows every backend set of the emulated load balancers and every
// LBRegistrar's conditions, and reports whether all the resources applied are
// Ready with their recorded backends present in OCI.
func render(ctx context.Context, c client.Client, emu *ociemu.Emulator, resources int) (string, bool, error) {
	var b strings.Builder
	state := emu.State()
	type set struct{ lb, kind, name string }
	var sets []set
	for _, lb := range state.LoadBalancers {
		for name := range lb.BackendSets {
			sets = append(sets, set{*lb.Id, "load balancer", name})
		}
	}
	for _, lb := range state.NetworkLoadBalancers {
		for name := range lb.BackendSets {
			sets = append(sets, set{*lb.Id, "network load balancer", name})
		}
	}
	sort.Slice(sets, func(i, j int) bool { return sets[i].lb+sets[i].name < sets[j].lb+sets[j].name })
	registered := map[string]bool{} // "lb/set/ip:port"
	lastLB := ""
	for _, s := range sets {
		if s.lb != lastLB {
			fmt.Fprintf(&b, "%s %s (%s)\n", s.kind, shortOCID(s.lb), emu.LifecycleState(s.lb))
			lastLB = s.lb
		}
		backends, err := emu.Backends(s.lb, s.name)
		if err != nil {
			return "", false, err
		}
		var shown []string
		for _, be := range backends {
			addr := net.JoinHostPort(be.IPAddress, strconv.Itoa(be.Port))
			registered[s.lb+"/"+s.name+"/"+addr] = true
			flags := ""
			if be.Drain {
				flags = " drain"
			}
			shown = append(shown, fmt.Sprintf("%s w%d%s", addr, be.Weight, flags))
		}
		fmt.Fprintf(&b, "  %-13s %s\n", s.name, strings.Join(shown, ", "))
	}

	var list v1beta1.LBRegistrarList
	if err := c.List(ctx, &list); err != nil {
		return "", false, err
	}
	allReady := len(list.Items) == resources
	b.WriteString("\nLBRegistrar                 Ready  Degraded  Conflict  registered\n")
	for _, r := range list.Items {
		ready := meta.IsStatusConditionTrue(r.Status.Conditions, v1beta1.ConditionReady) && r.Status.ObservedGeneration == r.Generation
		count := 0
		for _, bs := range r.Status.BackendSets {
			for _, be := range bs.Backends {
				count++
				if !registered[r.Spec.LoadBalancerID+"/"+bs.Name+"/"+net.JoinHostPort(be.IP, strconv.Itoa(int(be.Port)))] {
					ready = false
				}
			}
		}
		if count == 0 {
			ready = false
		}
		allReady = allReady && ready
		fmt.Fprintf(&b, "%-27s %-6s %-9s %-9s %d backends\n", r.Name, condition(r, v1beta1.ConditionReady),
			condition(r, v1beta1.ConditionDegraded), condition(r, v1beta1.ConditionConflict), count)
		for _, cond := range r.Status.Conditions {
			if cond.Status == metav1.ConditionTrue && cond.Type != v1beta1.ConditionReady || cond.Type == v1beta1.ConditionReady && cond.Status != metav1.ConditionTrue {
				fmt.Fprintf(&b, "    %s %s: %s\n", cond.Type, cond.Reason, cond.Message)
			}
		}
	}
	return b.String(), allReady, nil
}

func condition(r v1beta1.LBRegistrar, typ string) string {
	if c := meta.FindStatusCondition(r.Status.Conditions, typ); c != nil {
		return string(c.Status)
	}
	return "-"
}

func shortOCID(id string) string {
	if i := strings.LastIndexByte(id, '.'); i > 0 && len(id)-i > 12 {
		return id[:strings.IndexByte(id, '.')+1] + "…" + id[len(id)-12:]
	}
	return id
}
