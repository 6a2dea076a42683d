package reconciler_test

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"runtime/pprof"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/peppy-ratio/lbregistrar/api"
	"github.com/peppy-ratio/lbregistrar/api/v1beta1"
	"github.com/peppy-ratio/lbregistrar/index"
	"github.com/peppy-ratio/lbregistrar/reconciler"
	"github.com/peppy-ratio/lbregistrar/reconciler/backendset"
	"github.com/peppy-ratio/lbregistrar/test/eventually"
	"github.com/peppy-ratio/lbregistrar/test/kube"
	"github.com/peppy-ratio/lbregistrar/test/ociemu"
)

const (
	classicLB = "ocid1.loadbalancer.oc1.iad.ingress"
	networkLB = "ocid1.networkloadbalancer.oc1.iad.tcp"
	foreignIP = "192.168.9.9"
)

var (
	restConfig *rest.Config
	scheme     = newScheme()
	// k8s is an uncached client for the tests' own reads and writes.
	k8s client.Client
)

func newScheme() *runtime.Scheme {
	s := api.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		panic(err)
	}
	return s
}

// TestMain starts one kube-apiserver and etcd for the package. Without the
// test binaries (make test-assets) the API server tests are skipped.
func TestMain(m *testing.M) {
	// LBREGISTRAR_TEST_LOG names a file the controllers' logs go to, to
	// follow what a failing test saw.
	logger := logr.Discard()
	if path := os.Getenv("LBREGISTRAR_TEST_LOG"); path != "" {
		out, err := os.Create(path)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		logger = funcr.NewJSON(func(obj string) { fmt.Fprintln(out, obj) }, funcr.Options{Verbosity: 1, LogTimestamp: true})
	}
	logf.SetLogger(logger)
	if os.Getenv("KUBEBUILDER_ASSETS") == "" {
		if abs, err := filepath.Abs("../bin"); err == nil {
			os.Setenv("KUBEBUILDER_ASSETS", abs)
		}
	}
	var cluster *kube.Cluster
	if _, err := os.Stat(filepath.Join(os.Getenv("KUBEBUILDER_ASSETS"), "kube-apiserver")); err == nil {
		// The tests list while they wait; the benchmarks measure against an
		// API server as it comes.
		flag.Parse()
		if cluster, err = startPlainCluster(flag.Lookup("test.bench").Value.String() == ""); err != nil {
			fmt.Fprintln(os.Stderr, "starting the test API server:", err)
			os.Exit(1)
		}
		restConfig = cluster.Config
		if k8s, err = client.New(restConfig, client.Options{Scheme: scheme}); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
	}
	code := m.Run()
	if scaleCluster != nil {
		if err := scaleCluster.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "stopping the scale API server:", err)
		}
	}
	if cluster != nil {
		if err := cluster.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "stopping the test API server:", err)
		}
	}
	os.Exit(code)
}

// startPlainCluster starts an API server serving the LBRegistrar CRD
// without webhooks; quickLists as kube.Options has it.
func startPlainCluster(quickLists bool) (*kube.Cluster, error) {
	cluster, err := kube.StartEnv(context.Background(), kube.Options{Bare: true, QuickLists: quickLists})
	if err != nil {
		return nil, err
	}
	if err := cluster.InstallPlainCRD(); err != nil {
		_ = cluster.Stop()
		return nil, err
	}
	return cluster, nil
}

// fixture is an emulator seeded from testdata/seed.yaml, an API key for it
// in a Secret, and a manager running the reconciler against both.
type fixture struct {
	t      testing.TB
	ctx    context.Context
	emu    *ociemu.Emulator
	ns     string
	key    v1beta1.APIKey
	keyPEM []byte
	stop   []func()
	// cfg and api reach the fixture's API server: the package's (k8s),
	// unless newFixtureOn was given another.
	cfg *rest.Config
	api client.Client
	// cleanupNodes select the nodes cleanup deletes; none means every node.
	cleanupNodes []client.DeleteAllOfOption
}

var fixtureSeq atomic.Int32

// options are the reconciler's options for tests: the emulator's HTTPS
// endpoint trusted through --oci-ca-file, short polls and backoffs.
func (f *fixture) options() reconciler.Options {
	o := reconciler.DefaultOptions()
	o.OCI.LoadBalancerEndpoint = f.emu.HTTPSURL()
	o.OCI.NetworkLoadBalancerEndpoint = f.emu.HTTPSURL()
	o.OCI.CoreEndpoint = f.emu.HTTPSURL()
	o.OCICAFile = filepath.Join(f.t.TempDir(), "oci-ca.pem")
	f.must(os.WriteFile(o.OCICAFile, f.emu.CACertPEM(), 0o600))
	o.OCI.RateLimit, o.OCI.Burst = 1000, 1000
	o.OCI.PollMin, o.OCI.PollMax = 5*time.Millisecond, 100*time.Millisecond
	o.Backoff = backendset.Backoff{Base: 10 * time.Millisecond, Max: 200 * time.Millisecond, Attempts: 20}
	o.DrainPeriod, o.NodeDrainPeriod = 0, 0
	// Endpoint changes still go through the batch's delay, short enough
	// not to add up over the tests' many of them.
	o.EndpointBatchPeriod = 10 * time.Millisecond
	o.CleanupTimeout = 30 * time.Second
	o.Resync = time.Minute
	o.RecordKey = client.ObjectKey{Namespace: f.ns, Name: reconciler.DefaultRecordKeySecret}
	return o
}

func newFixture(t testing.TB, emuOpts ociemu.Options) *fixture {
	t.Helper()
	skipWithoutAPIServer(t)
	return newFixtureOn(t, emuOpts, restConfig, k8s)
}

func skipWithoutAPIServer(t testing.TB) {
	t.Helper()
	if restConfig == nil {
		t.Skip("no test API server binaries in KUBEBUILDER_ASSETS; run make test-assets")
	}
}

// newFixtureOn is newFixture on the API server cfg reaches, through api.
func newFixtureOn(t testing.TB, emuOpts ociemu.Options, cfg *rest.Config, api client.Client) *fixture {
	t.Helper()
	// Started first, so closed last: the fixture's cleanup still reaches it.
	emu := ociemu.StartSeeded(t, "testdata/seed.yaml", emuOpts)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	f := &fixture{t: t, ctx: ctx, emu: emu, ns: fmt.Sprintf("lbr-%d", fixtureSeq.Add(1)), cfg: cfg, api: api}
	t.Cleanup(func() {
		f.cleanup()
		cancel()
	})
	f.must(f.api.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: f.ns}}))
	f.key, f.keyPEM = f.newKey("oci-key")
	return f
}

// newKey generates an API key, registers it with the emulator, and stores
// its private half in a Secret.
func (f *fixture) newKey(secret string) (v1beta1.APIKey, []byte) {
	key, keyPEM, register := f.unregisteredKey(secret)
	register()
	return key, keyPEM
}

// unregisteredKey is newKey leaving the registration with the emulator to
// register: until then OCI refuses the key, as it does a fresh key that is
// not ACTIVE yet.
func (f *fixture) unregisteredKey(secret string) (key v1beta1.APIKey, keyPEM []byte, register func()) {
	f.t.Helper()
	priv, err := rsa.GenerateKey(rand.Reader, 2048)
	f.must(err)
	pub, err := x509.MarshalPKIXPublicKey(&priv.PublicKey)
	f.must(err)
	fingerprint, err := ociemu.Fingerprint(&priv.PublicKey)
	f.must(err)
	key = v1beta1.APIKey{
		User: "ocid1.user.oc1..test-" + secret, Fingerprint: fingerprint, Tenancy: "ocid1.tenancy.oc1..test", Region: "us-ashburn-1",
		PrivateKey: v1beta1.SecretKeySource{Namespace: f.ns, SecretKeyRef: v1beta1.SecretKeyRef{Name: secret, Key: "key.pem"}},
	}
	keyPEM = pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(priv)})
	f.applySecret(secret, keyPEM)
	return key, keyPEM, func() {
		_, err := f.emu.RegisterPublicKey(key.Tenancy, key.User, pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pub}))
		f.must(err)
	}
}

func (f *fixture) applySecret(name string, keyPEM []byte) {
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: name}}
	_, err := ctrl.CreateOrUpdate(f.ctx, f.api, s, func() error {
		s.Data = map[string][]byte{"key.pem": keyPEM}
		return nil
	})
	f.must(err)
}

// startManager runs the reconciler in a manager until the test ends or stop is called.
func (f *fixture) startManager(o reconciler.Options, mutate ...func(*ctrl.Options)) (mgr ctrl.Manager, stop func()) {
	f.t.Helper()
	return f.startManagerOn(f.cfg, false, o, mutate...)
}

// startManagerOn is startManager reaching the API server through cfg; with
// mayFail, the manager ending in an error (a lost lease) is expected.
func (f *fixture) startManagerOn(cfg *rest.Config, mayFail bool, o reconciler.Options, mutate ...func(*ctrl.Options)) (mgr ctrl.Manager, stop func()) {
	f.t.Helper()
	mo := ctrl.Options{
		Scheme:                 scheme,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Controller:             config.Controller{SkipNameValidation: ptr.To(true)},
		Cache:                  reconciler.CacheOptions(),
	}
	for _, m := range mutate {
		m(&mo)
	}
	mgr, err := ctrl.NewManager(cfg, mo)
	f.must(err)
	f.must(index.Add(f.ctx, mgr.GetFieldIndexer()))
	f.must(reconciler.SetupWithManager(f.ctx, mgr, o))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		// Its goroutines carry a profile label, as the emulator's do, for
		// BenchmarkScale to tell the controller's CPU from the emulator's.
		pprof.Do(ctx, pprof.Labels(ociemu.ProfileLabel, controllerProfileName), func(ctx context.Context) {
			if err := mgr.Start(ctx); err != nil && !mayFail {
				f.t.Errorf("manager: %v", err)
			}
		})
	}()
	var stopped atomic.Bool
	stop = func() {
		if stopped.CompareAndSwap(false, true) {
			cancel()
			<-done
		}
	}
	f.stop = append(f.stop, stop)
	return mgr, stop
}

// controllerProfileName is the value of the profile label ociemu.ProfileLabel
// on the goroutines of the managers a fixture starts.
const controllerProfileName = "controller"

// cleanup deletes every LBRegistrar while a manager still runs, so their
// finalizers complete, then removes the test's nodes and stops the managers.
func (f *fixture) cleanup() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var list v1beta1.LBRegistrarList
	if err := f.api.List(ctx, &list); err == nil {
		for i := range list.Items {
			_ = f.api.Delete(ctx, &list.Items[i])
		}
	}
	for ctx.Err() == nil {
		if err := f.api.List(ctx, &list); err != nil || len(list.Items) == 0 {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	// What is left gets a deadline of its own: nodes must not outlive the
	// test, whatever the wait above took.
	ctx, cancel = context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if len(list.Items) > 0 { // no manager left to finalize them
		for i := range list.Items {
			o := &list.Items[i]
			o.Finalizers = nil
			_ = f.api.Update(ctx, o)
		}
	}
	_ = f.api.DeleteAllOf(ctx, &corev1.Node{}, f.cleanupNodes...)
	for _, stop := range slices.Backward(f.stop) {
		stop()
	}
}

func (f *fixture) must(err error) {
	f.t.Helper()
	if err != nil {
		f.t.Fatal(err)
	}
}

// eventually retries check until it returns nil or the timeout passes.
func (f *fixture) eventually(timeout time.Duration, check func() error) {
	f.t.Helper()
	eventually.Passes(f.t, timeout, 20*time.Millisecond, check)
}

// node creates a node (changed by mutate before creation) with an InternalIP, Ready.
func (f *fixture) node(name, ip string, mutate ...func(*corev1.Node)) *corev1.Node {
	f.t.Helper()
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{}}}
	for _, m := range mutate {
		m(n)
	}
	// Created with its status in one call, as a kubelet registers a node.
	n.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: ip}}
	n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}
	f.must(f.api.Create(f.ctx, n))
	return n
}

// updateNode re-reads a node, changes it and writes it back.
func (f *fixture) updateNode(name string, change func(*corev1.Node)) {
	f.t.Helper()
	var n corev1.Node
	f.must(f.api.Get(f.ctx, client.ObjectKey{Name: name}, &n))
	if n.Labels == nil {
		n.Labels = map[string]string{}
	}
	change(&n)
	f.must(f.api.Update(f.ctx, &n))
}

// setNodeReady writes a node's Ready condition, as its kubelet would.
func (f *fixture) setNodeReady(name string, ready corev1.NodeCondition) {
	f.t.Helper()
	var n corev1.Node
	f.must(f.api.Get(f.ctx, client.ObjectKey{Name: name}, &n))
	ready.Type = corev1.NodeReady
	n.Status.Conditions = []corev1.NodeCondition{ready}
	f.must(f.api.Status().Update(f.ctx, &n))
}

// service creates a NodePort Service; the API server allocates node ports
// not given. A test that gives one takes it from 30000-30085, the band
// the API server keeps for ports given (KEP-3668, the node port static
// subrange: it allocates from above it while it can), so no Service of
// the package's other tests, sharing the API server, has taken it.
func (f *fixture) service(name string, ports ...corev1.ServicePort) *corev1.Service {
	f.t.Helper()
	s := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: name},
		Spec:       corev1.ServiceSpec{Type: corev1.ServiceTypeNodePort, Ports: ports, Selector: map[string]string{"app": name}},
	}
	f.must(f.api.Create(f.ctx, s))
	return s
}

// endpoints replaces the Service's EndpointSlice with one ready endpoint per node.
func (f *fixture) endpoints(service string, readyOn ...string) {
	f.t.Helper()
	var eps []discoveryv1.Endpoint
	for _, n := range readyOn {
		eps = append(eps, discoveryv1.Endpoint{NodeName: ptr.To(n), Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}})
	}
	f.endpointSlice(service, eps...)
}

// endpointSlice replaces the Service's EndpointSlice with eps, numbering
// their addresses.
func (f *fixture) endpointSlice(service string, eps ...discoveryv1.Endpoint) {
	f.t.Helper()
	s := &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: service + "-slice"}}
	var svc corev1.Service
	f.must(f.api.Get(f.ctx, client.ObjectKey{Namespace: f.ns, Name: service}, &svc))
	_, err := ctrl.CreateOrUpdate(f.ctx, f.api, s, func() error {
		s.Labels = map[string]string{discoveryv1.LabelServiceName: service}
		s.AddressType = discoveryv1.AddressTypeIPv4
		s.Ports = nil
		for _, p := range svc.Spec.Ports { // the slice serves every port, as for pods that have them all
			s.Ports = append(s.Ports, discoveryv1.EndpointPort{Name: ptr.To(p.Name), Port: ptr.To(p.Port), Protocol: ptr.To(p.Protocol)})
		}
		s.Endpoints = eps
		for i := range s.Endpoints {
			s.Endpoints[i].Addresses = []string{fmt.Sprintf("10.244.0.%d", i+1)}
		}
		return nil
	})
	f.must(err)
}

// registrar creates an LBRegistrar with the fixture's API key, changed by
// mutate before creation.
func (f *fixture) registrar(name, lb string, targets []v1beta1.Target, mutate ...func(*v1beta1.LBRegistrar)) *v1beta1.LBRegistrar {
	f.t.Helper()
	o := &v1beta1.LBRegistrar{
		ObjectMeta: metav1.ObjectMeta{Name: f.ns + "-" + name},
		Spec:       v1beta1.LBRegistrarSpec{LoadBalancerID: lb, APIKey: f.key.DeepCopy(), Services: targets},
	}
	for _, m := range mutate {
		m(o)
	}
	f.must(f.api.Create(f.ctx, o))
	return o
}

// waitServerClockPast waits until the API server stamps new objects with a
// creationTimestamp later than t; the stamps have second resolution, so an
// object created right after another may carry the same one.
func (f *fixture) waitServerClockPast(t metav1.Time) {
	f.t.Helper()
	f.eventually(10*time.Second, func() error {
		probe := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "clock"}}
		f.must(f.api.Create(f.ctx, probe, client.DryRunAll))
		if !t.Before(&probe.CreationTimestamp) {
			return fmt.Errorf("the API server still stamps %s", probe.CreationTimestamp)
		}
		return nil
	})
}

func (f *fixture) get(o *v1beta1.LBRegistrar) *v1beta1.LBRegistrar {
	f.t.Helper()
	var cur v1beta1.LBRegistrar
	f.must(f.api.Get(f.ctx, client.ObjectKeyFromObject(o), &cur))
	return &cur
}

// backends returns the backend set's backends as sorted "ip:port/weight[flags]" strings.
func (f *fixture) backends(lb, set string) []string {
	f.t.Helper()
	bs, err := f.emu.Backends(lb, set)
	f.must(err)
	var out []string
	for _, b := range bs {
		s := fmt.Sprintf("%s:%d/%d", b.IPAddress, b.Port, b.Weight)
		if b.IPAddress == "" {
			s = fmt.Sprintf("%s:%d/%d", b.TargetID, b.Port, b.Weight)
		}
		if b.Backup {
			s += ",backup"
		}
		if b.Drain {
			s += ",drain"
		}
		if b.Offline {
			s += ",offline"
		}
		out = append(out, s)
	}
	slices.Sort(out)
	return out
}

// expectBackends waits until the backend set holds exactly want (sorted).
func (f *fixture) expectBackends(lb, set string, want ...string) {
	f.t.Helper()
	slices.Sort(want)
	f.eventually(20*time.Second, func() error {
		if got := f.backends(lb, set); !slices.Equal(got, want) {
			return fmt.Errorf("backend set %s: got %v, want %v", set, got, want)
		}
		return nil
	})
}

func fixedPort(set string, port int32) v1beta1.Target {
	return v1beta1.Target{NodePort: port, BackendSetName: set, Weight: 1}
}

// expectConflict waits for o to be in Conflict, its backend sets belonging to holder.
func (f *fixture) expectConflict(o *v1beta1.LBRegistrar, holder string) {
	f.t.Helper()
	f.eventually(10*time.Second, func() error {
		c := meta.FindStatusCondition(f.get(o).Status.Conditions, v1beta1.ConditionConflict)
		if c == nil || c.Status != metav1.ConditionTrue || !strings.Contains(c.Message, holder) {
			return fmt.Errorf("%s's Conflict: %+v", o.Name, c)
		}
		return nil
	})
}

// waitReady waits until obj's Ready condition has reason at obj's current
// generation, with the status that reason comes with (True for Registered,
// False for any other), and each check in also passes on the same read.
func (f *fixture) waitReady(obj *v1beta1.LBRegistrar, reason string, also ...func(o *v1beta1.LBRegistrar, ready *metav1.Condition) error) {
	f.t.Helper()
	want := metav1.ConditionFalse
	if reason == v1beta1.ReasonRegistered {
		want = metav1.ConditionTrue
	}
	f.eventually(20*time.Second, func() error {
		cur := f.get(obj)
		ready := meta.FindStatusCondition(cur.Status.Conditions, v1beta1.ConditionReady)
		if ready == nil || ready.Status != want || ready.Reason != reason || ready.ObservedGeneration != cur.Generation {
			return fmt.Errorf("%s's Ready: %+v, want %s with reason %s at generation %d", cur.Name, ready, want, reason, cur.Generation)
		}
		for _, check := range also {
			if err := check(cur, ready); err != nil {
				return err
			}
		}
		return nil
	})
}

// waitSuspended waits until the controller has seen obj's spec.suspend:
// Suspended True, status.observedGeneration at the spec's generation, and
// Ready as the last reconcile before the pause left it.
func (f *fixture) waitSuspended(obj *v1beta1.LBRegistrar, ready metav1.ConditionStatus) {
	f.t.Helper()
	f.eventually(20*time.Second, func() error {
		cur := f.get(obj)
		suspended := meta.FindStatusCondition(cur.Status.Conditions, v1beta1.ConditionSuspended)
		if suspended == nil || suspended.Status != metav1.ConditionTrue || suspended.ObservedGeneration != cur.Generation || cur.Status.ObservedGeneration != cur.Generation {
			return fmt.Errorf("%s's Suspended: %+v, observedGeneration %d, want True at generation %d", cur.Name, suspended, cur.Status.ObservedGeneration, cur.Generation)
		}
		if got := meta.FindStatusCondition(cur.Status.Conditions, v1beta1.ConditionReady); got == nil || got.Status != ready {
			return fmt.Errorf("%s's Ready while suspended: %+v, want %s as before the pause", cur.Name, got, ready)
		}
		if meta.IsStatusConditionTrue(cur.Status.Conditions, v1beta1.ConditionReconciling) {
			return fmt.Errorf("%s is Reconciling while suspended", cur.Name)
		}
		return nil
	})
}

// updateRegistrar changes a resource's spec, retrying on write conflicts
// with the controller's status updates.
func (f *fixture) updateRegistrar(o *v1beta1.LBRegistrar, change func(*v1beta1.LBRegistrar)) {
	f.t.Helper()
	f.must(retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur := f.get(o)
		change(cur)
		return f.api.Update(f.ctx, cur)
	}))
}

// tcpProxy forwards connections to target until killed, which cuts every
// connection at once: from the other side, the process behind it is gone.
type tcpProxy struct {
	ln     net.Listener
	target string
	mu     sync.Mutex
	conns  []net.Conn
	killed bool
}

func startProxy(t testing.TB, target string) *tcpProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &tcpProxy{ln: ln, target: target}
	t.Cleanup(p.kill)
	go func() {
		for {
			in, err := ln.Accept()
			if err != nil {
				return
			}
			out, err := net.Dial("tcp", target)
			if err != nil {
				in.Close()
				continue
			}
			if !p.track(in, out) {
				return
			}
			go func() { _, _ = io.Copy(out, in); out.Close() }()
			go func() { _, _ = io.Copy(in, out); in.Close() }()
		}
	}()
	return p
}

func (p *tcpProxy) track(conns ...net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.killed {
		for _, c := range conns {
			c.Close()
		}
		return false
	}
	p.conns = append(p.conns, conns...)
	return true
}

func (p *tcpProxy) addr() string { return p.ln.Addr().String() }

func (p *tcpProxy) kill() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.killed = true
	p.ln.Close()
	for _, c := range p.conns {
		c.Close()
	}
}
