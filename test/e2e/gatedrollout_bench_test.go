package e2e

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/peppy-ratio/lbregistrar/api/v1beta1"
	"github.com/peppy-ratio/lbregistrar/reconciler/desired"
	"github.com/peppy-ratio/lbregistrar/test/eventually"
	"github.com/peppy-ratio/lbregistrar/test/kube"
	"github.com/peppy-ratio/lbregistrar/test/ociemu"
	"github.com/peppy-ratio/lbregistrar/test/scale"
)

// What the gated rollouts' load balancer does: each write's work request
// takes rolloutLatency (L), and the health checker looks at each backend
// every rolloutInterval, agreeing after rolloutRetries checks in a row. A
// new backend cannot be OK sooner than L + retries x interval after its
// write was sent: the floor of every surge batch.
const (
	rolloutLatency  = time.Second
	rolloutInterval = time.Second
	rolloutRetries  = 3
	rolloutBatches  = 4 // maxSurge 25 %, maxUnavailable 0
	rolloutNLB      = "ocid1.networkloadbalancer.oc1.ap-tokyo-1.amaaaaaaw3qjxjtp6pcc5a2sf6vwhrr7eoxqvsmbm3tcfpgpqbrollout"
	rolloutNodePort = 30090
)

// rolloutSeed is the NLB the gated rollouts register into: web-pods takes
// the pods (each checked on its own port), web-nodes the nodes at the
// Service's node port; neither preserves the client's source, so backends
// are taken by address.
var rolloutSeed = fmt.Sprintf(`networkLoadBalancers:
  - id: %s
    displayName: rollout
    backendSets:
      web-pods:
        policy: FIVE_TUPLE
        isPreserveSource: false
        healthChecker: {protocol: HTTP, urlPath: /, returnCode: 200, intervalInMillis: %d, timeoutInMillis: 500, retries: %d}
        backends: []
      web-nodes:
        policy: FIVE_TUPLE
        isPreserveSource: false
        healthChecker: {protocol: TCP, port: %d, intervalInMillis: %[2]d, timeoutInMillis: 500, retries: %[3]d}
        backends: []
`, rolloutNLB, rolloutInterval.Milliseconds(), rolloutRetries, rolloutNodePort)

// rolloutCase is one gated rollout: the Deployment's replicas, and whether
// its pods stand as backends themselves or behind their nodes' node port
// (externalTrafficPolicy: Local).
type rolloutCase struct {
	replicas int
	local    bool
}

func (rc rolloutCase) String() string {
	if rc.local {
		return fmt.Sprintf("node-port-local-%d", rc.replicas)
	}
	return fmt.Sprintf("pods-%d", rc.replicas)
}

// BenchmarkGatedRollout rolls out a Deployment (maxSurge 25 %,
// maxUnavailable 0) with the real Deployment, ReplicaSet and EndpointSlice
// controllers and the tests' kubelet, whose pods' readiness gate waits for
// the load balancer (gated), against the same rollout in a namespace
// without the gate (baseline). Reported: x-floor, the gated rollout's time
// over its floor, the baseline's plus, per batch, L + retries x interval;
// gate-p50-s, gate-p99-s and gate-max-s, from a pod's containers ready to
// its gate True, and gate-p99-over-floor-s beside L + retries x interval;
// writes/set/batch, the OCI writes to the pods' backend set per batch;
// reads/pod and health-reads/pod, per new pod; drain-p50-s and
// drain-max-s, from a pod's endpoint turning terminating to its backend
// drained (pods only); controller-ms/endpoint-change, the controller's
// CPU per change of an endpoint the EndpointSlice controller published;
// and changes-spread-max-s, how long the longest run of endpoint changes
// took (changesSpread).
func BenchmarkGatedRollout(b *testing.B) {
	for _, rc := range []rolloutCase{{replicas: 20}, {replicas: 100}, {replicas: 20, local: true}, {replicas: 100, local: true}} {
		b.Run(rc.String(), func(b *testing.B) {
			env := newRolloutBench(b, rc)
			var floor time.Duration
			b.Run("baseline", func(b *testing.B) {
				for range b.N {
					floor = env.rollout(b, env.plain).took
				}
			})
			b.Run("gated", func(b *testing.B) {
				for range b.N {
					r := env.rollout(b, env.shop)
					env.report(b, r, floor)
				}
			})
		})
	}
}

// rolloutBench is one case's cluster, emulator and controller, with a
// Deployment in a namespace with the readiness gate (shop) and one without
// (plain).
type rolloutBench struct {
	rc          rolloutCase
	c           *kube.Cluster
	emu         *ociemu.Emulator
	serve       serveProcess
	shop, plain *rolloutNamespace
}

// rolloutNamespace is a namespace with its kubelet and Deployment "web".
type rolloutNamespace struct {
	name    string
	kubelet *kubelet
	version int
}

func newRolloutBench(b *testing.B, rc rolloutCase) *rolloutBench {
	c := kube.Start(b, kube.Options{Bare: true})
	nodes := []string{"node-0", "node-1", "node-2", "node-3"}
	pool := 6 * rc.replicas // the first pods, and the new ones of a few rollouts
	env := &rolloutBench{rc: rc, c: c,
		shop:  &rolloutNamespace{name: "shop", kubelet: newKubelet(c, "shop", 1, pool)},
		plain: &rolloutNamespace{name: "plain", kubelet: newKubelet(c, "plain", 2, pool)}}
	standIns := map[string]string{}
	for _, ns := range []*rolloutNamespace{env.shop, env.plain} {
		ns.kubelet.nodes, ns.kubelet.every, ns.kubelet.stopAfter = nodes, 50*time.Millisecond, 3*time.Second
		for ip, standIn := range ns.kubelet.standIns {
			standIns[ip] = standIn
		}
	}
	for i := range nodes {
		standIns[fmt.Sprintf("10.0.90.%d", i+1)] = fmt.Sprintf("127.0.90.%d", i+1)
	}
	seed := filepath.Join(b.TempDir(), "seed.yaml")
	if err := os.WriteFile(seed, []byte(rolloutSeed), 0o600); err != nil {
		b.Fatal(err)
	}
	env.emu = ociemu.StartSeeded(b, seed, ociemu.Options{Region: "ap-tokyo-1", WorkRequestLatency: rolloutLatency, StandIns: standIns})
	kubectl(b, c, "", "create", "namespace", kube.Namespace)
	for i, node := range nodes {
		addNode(b, c, node, fmt.Sprintf("10.0.90.%d", i+1))
	}
	// serve's shortest poll, 500 ms, is for OCI's work requests of many
	// seconds; the benchmark's L is a second, so polls are scaled with it.
	env.serve = serveAdmitting(b, c, env.emu, fmt.Sprintf("--work-request-poll-min=%s", rolloutLatency/16))
	c.StartControllerManager(b, "deployment-controller", "replicaset-controller", "endpointslice-controller")
	ctx := testContext(b)
	for _, ns := range []*rolloutNamespace{env.shop, env.plain} {
		labels := map[string]string{}
		if ns == env.shop {
			labels[v1beta1.ReadinessGatesNamespaceLabel] = v1beta1.ReadinessGatesEnabled
		}
		if err := c.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns.name, Labels: labels}}); err != nil {
			b.Fatal(err)
		}
		svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns.name, Name: "web"},
			Spec: corev1.ServiceSpec{Selector: map[string]string{"app": "web"},
				Ports: []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromInt32(rolloutPort)}}}}
		if rc.local && ns == env.shop {
			svc.Spec.Type, svc.Spec.ExternalTrafficPolicy = corev1.ServiceTypeNodePort, corev1.ServiceExternalTrafficPolicyLocal
			svc.Spec.Ports[0].NodePort = rolloutNodePort
		}
		if err := c.Client.Create(ctx, svc); err != nil {
			b.Fatal(err)
		}
	}
	target, set := "targetType: Pod, backendSetName: web-pods", "web-pods"
	if rc.local {
		target, set = "backendSetName: web-nodes", "web-nodes"
		startKubeProxy(b, c, "shop", nodes, rolloutNodePort)
	}
	kubectl(b, c, apiKeyFor(b, c, env.emu, `apiVersion: nodes.peppy-ratio.dev/v1beta1
kind: LBRegistrar
metadata:
  name: shop-web
spec:
  loadBalancerId: `+rolloutNLB+`
  services:
  - {name: web, namespace: shop, port: http, `+target+`, weight: 1}
`+apiKeySpec), "apply", "-f", "-")
	kctx, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for _, ns := range []*rolloutNamespace{env.shop, env.plain} {
		wg.Go(func() { ns.kubelet.run(kctx, b) })
		env.deploy(b, ns)
	}
	b.Cleanup(func() { stop(); wg.Wait() })
	for _, ns := range []*rolloutNamespace{env.shop, env.plain} {
		env.waitComplete(b, ns, 5*time.Minute)
	}
	want := rc.replicas
	if rc.local {
		want = len(nodes)
	}
	eventually.Passes(b, 3*time.Minute, 100*time.Millisecond, func() error {
		backends, err := env.emu.Backends(rolloutNLB, set)
		if err != nil {
			return err
		}
		if len(backends) != want {
			return fmt.Errorf("backend set %s has %d backends, want %d", set, len(backends), want)
		}
		return nil
	})
	return env
}

// deploy creates ns's Deployment web.
func (env *rolloutBench) deploy(b *testing.B, ns *rolloutNamespace) {
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns.name, Name: "web"}, Spec: appsv1.DeploymentSpec{
		Replicas: ptr.To(int32(env.rc.replicas)),
		Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
		Strategy: appsv1.DeploymentStrategy{Type: appsv1.RollingUpdateDeploymentStrategyType, RollingUpdate: &appsv1.RollingUpdateDeployment{
			MaxUnavailable: ptr.To(intstr.FromInt32(0)), MaxSurge: ptr.To(intstr.FromString("25%"))}},
		Template: corev1.PodTemplateSpec{
			ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web"}, Annotations: map[string]string{"version": "0"}},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "web",
				Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: rolloutPort}}}}},
		},
	}}
	if err := env.c.Client.Create(testContext(b), d); err != nil {
		b.Fatal(err)
	}
}

// waitComplete waits until ns's Deployment has rolled out its generation.
func (env *rolloutBench) waitComplete(b *testing.B, ns *rolloutNamespace, within time.Duration) {
	want := int32(env.rc.replicas)
	eventually.Passes(b, within, 20*time.Millisecond, func() error {
		var d appsv1.Deployment
		if err := env.c.Client.Get(testContext(b), client.ObjectKey{Namespace: ns.name, Name: "web"}, &d); err != nil {
			return err
		}
		if s := d.Status; s.ObservedGeneration != d.Generation || s.UpdatedReplicas != want || s.AvailableReplicas != want || s.Replicas != want {
			return fmt.Errorf("deployment %s/web generation %d: %+v", ns.name, d.Generation, s)
		}
		return nil
	})
}

// rolled is what one rollout took, and what happened meanwhile.
type rolled struct {
	took       time.Duration
	newPods    map[string]bool // by name
	gateTrue   map[string]time.Time
	start      time.Time
	appeared   map[string]time.Time // pod address -> its endpoint first seen
	terminated map[string]time.Time // pod address -> its endpoint first seen terminating
	registered map[string]time.Time // pod address -> its backend first seen
	drained    map[string]time.Time // pod address -> its backend first seen drained
	addresses  map[string]string    // new pod -> its address
	wrs        []ociemu.WorkRequest
	changes    int     // endpoint changes the EndpointSlice controller published
	cpu        float64 // the controller's CPU seconds
	calls      []ociemu.Call
	writes     int // work requests of the backend set
}

// rollout changes ns's pod template and waits for the rollout to
// complete, watching the pods, the endpoints and the backend set.
func (env *rolloutBench) rollout(b *testing.B, ns *rolloutNamespace) rolled {
	b.StopTimer()
	ctx, stop := context.WithCancel(testContext(b))
	r := rolled{newPods: map[string]bool{}, gateTrue: map[string]time.Time{}, appeared: map[string]time.Time{}, terminated: map[string]time.Time{},
		registered: map[string]time.Time{}, drained: map[string]time.Time{}, addresses: map[string]string{}}
	var mu sync.Mutex
	var wg sync.WaitGroup
	watcher, err := client.NewWithWatch(env.c.Config, client.Options{Scheme: env.c.Scheme})
	if err != nil {
		b.Fatal(err)
	}
	pods, err := watcher.Watch(ctx, &corev1.PodList{}, client.InNamespace(ns.name))
	if err != nil {
		b.Fatal(err)
	}
	sliceWatch, err := watcher.Watch(ctx, &discoveryv1.EndpointSliceList{}, client.InNamespace(ns.name))
	if err != nil {
		b.Fatal(err)
	}
	wg.Go(func() {
		defer pods.Stop()
		for ev := range pods.ResultChan() {
			p, ok := ev.Object.(*corev1.Pod)
			if !ok || ev.Type == watch.Deleted || !desired.GateTrue(p) {
				continue
			}
			mu.Lock()
			if _, seen := r.gateTrue[p.Name]; !seen {
				r.gateTrue[p.Name] = time.Now()
			}
			mu.Unlock()
		}
	})
	wg.Go(func() {
		defer sliceWatch.Stop()
		last := map[string]discoveryv1.EndpointConditions{}
		for ev := range sliceWatch.ResultChan() {
			s, ok := ev.Object.(*discoveryv1.EndpointSlice)
			if !ok || ev.Type == watch.Deleted {
				continue
			}
			now := time.Now()
			mu.Lock()
			for _, ep := range s.Endpoints {
				if len(ep.Addresses) == 0 {
					continue
				}
				addr := ep.Addresses[0]
				if _, seen := r.appeared[addr]; !seen {
					r.appeared[addr] = now
				}
				if was, seen := last[addr]; !seen || !sameEndpoint(was, ep.Conditions) {
					r.changes++
					last[addr] = ep.Conditions
				}
				if ptr.Deref(ep.Conditions.Terminating, false) {
					if _, seen := r.terminated[addr]; !seen {
						r.terminated[addr] = now
					}
				}
			}
			mu.Unlock()
		}
	})
	set := "web-pods"
	if env.rc.local {
		set = "web-nodes"
	}
	wg.Go(func() {
		for ctx.Err() == nil {
			if backends, err := env.emu.Backends(rolloutNLB, set); err == nil {
				now := time.Now()
				mu.Lock()
				for _, be := range backends {
					addr := be.IPAddress
					if _, seen := r.registered[addr]; !seen {
						r.registered[addr] = now
					}
					if _, seen := r.drained[addr]; be.Drain && !seen {
						r.drained[addr] = now
					}
				}
				mu.Unlock()
			}
			select {
			case <-ctx.Done():
			case <-time.After(20 * time.Millisecond):
			}
		}
	})
	var before appsv1.Deployment
	if err := env.c.Client.Get(ctx, client.ObjectKey{Namespace: ns.name, Name: "web"}, &before); err != nil {
		b.Fatal(err)
	}
	var old corev1.PodList
	if err := env.c.Client.List(ctx, &old, client.InNamespace(ns.name)); err != nil {
		b.Fatal(err)
	}
	env.emu.ResetCalls()
	wrsBefore := len(env.emu.WorkRequests())
	cpu0, _ := scale.CPUSeconds(env.serve.PID())
	ns.version++
	before.Spec.Template.Annotations["version"] = fmt.Sprint(ns.version)
	b.StartTimer()
	r.start = time.Now()
	if err := env.c.Client.Update(ctx, &before); err != nil {
		b.Fatal(err)
	}
	env.waitComplete(b, ns, 10*time.Minute)
	r.took = time.Since(r.start)
	b.StopTimer()
	cpu1, _ := scale.CPUSeconds(env.serve.PID())
	r.cpu = cpu1 - cpu0
	r.calls = env.emu.Calls()
	wrs := env.emu.WorkRequests()
	for _, wr := range wrs[:len(wrs)-wrsBefore] {
		if wr.BackendSet == set {
			r.writes++
			r.wrs = append(r.wrs, wr)
		}
	}
	// The old pods' drains come after the rollout completes, the last
	// batch's old pods being deleted as it does: wait for them.
	time.Sleep(rolloutLatency + 2*time.Second)
	stop()
	wg.Wait()
	var now corev1.PodList
	if err := env.c.Client.List(testContext(b), &now, client.InNamespace(ns.name)); err != nil {
		b.Fatal(err)
	}
	oldNames := map[string]bool{}
	for _, p := range old.Items {
		oldNames[p.Name] = true
	}
	for _, p := range now.Items {
		if !oldNames[p.Name] && p.DeletionTimestamp == nil {
			r.newPods[p.Name] = true
			r.addresses[p.Name] = p.Status.PodIP
		}
	}
	b.StartTimer()
	return r
}

// report reports r's figures, beside floor, the baseline's rollout time.
func (env *rolloutBench) report(b *testing.B, r rolled, floor time.Duration) {
	perBatch := rolloutLatency + rolloutRetries*rolloutInterval
	b.ReportMetric(r.took.Seconds()/(floor+rolloutBatches*perBatch).Seconds(), "x-floor")
	var gate []time.Duration
	for pod := range r.newPods {
		ready, ok1 := env.shop.kubelet.containersReadyAt(pod)
		gated, ok2 := r.gateTrue[pod]
		if ok1 && ok2 {
			gate = append(gate, gated.Sub(ready))
		}
	}
	if len(gate) < len(r.newPods) {
		b.Errorf("gate latency of %d of the %d new pods", len(gate), len(r.newPods))
	}
	p99 := percentile(gate, 0.99) / 1000
	b.ReportMetric(percentile(gate, 0.5)/1000, "gate-p50-s")
	b.ReportMetric(p99, "gate-p99-s")
	b.ReportMetric(percentile(gate, 1)/1000, "gate-max-s")
	b.ReportMetric(p99-perBatch.Seconds(), "gate-p99-over-floor-s")
	b.ReportMetric(float64(r.writes)/rolloutBatches, "writes/set/batch")
	reads, health := 0, 0
	for _, c := range r.calls {
		switch c.Operation {
		case "GetBackendSet":
			reads++
		case "GetBackendSetHealth":
			health++
		}
	}
	b.ReportMetric(float64(reads)/float64(len(r.newPods)), "reads/pod")
	b.ReportMetric(float64(health)/float64(len(r.newPods)), "health-reads/pod")
	if !env.rc.local {
		var drains []time.Duration
		for addr, at := range r.terminated {
			if drained, ok := r.drained[addr]; ok {
				drains = append(drains, max(drained.Sub(at), 0))
			}
		}
		b.ReportMetric(percentile(drains, 0.5)/1000, "drain-p50-s")
		b.ReportMetric(percentile(drains, 1)/1000, "drain-max-s")
	}
	if r.changes > 0 {
		b.ReportMetric(r.cpu*1000/float64(r.changes), "controller-ms/endpoint-change")
	}
	b.ReportMetric(env.changesSpread(r).Seconds(), "changes-spread-max-s")
	if path := os.Getenv("LBREGISTRAR_BENCH_TIMELINE"); path != "" {
		if err := os.WriteFile(path, []byte(env.timeline(r)), 0o600); err != nil {
			b.Error(err)
		}
	}
}

// changesSpread is the longest run of the rollout's endpoint changes (a
// new pod's endpoint appearing, an old pod's turning terminating) with no
// pause of L/2 in it, from its first change to its last: how long one
// write would have to wait to take a surge batch whole, beside
// --endpoint-batch-period. The Deployment and ReplicaSet controllers
// make the changes, not lbregistrar; but a batch written in two parts has
// its gates open in two parts, a write apart, and the changes they let
// through come in two runs, which a pause shorter than L/2 joins.
func (env *rolloutBench) changesSpread(r rolled) time.Duration {
	var at []time.Time
	for _, addr := range r.addresses {
		if t, ok := r.appeared[addr]; ok {
			at = append(at, t)
		}
	}
	for _, t := range r.terminated {
		at = append(at, t)
	}
	slices.SortFunc(at, time.Time.Compare)
	var longest time.Duration
	for i, first := 0, 0; i < len(at); i++ {
		if i > 0 && at[i].Sub(at[i-1]) > rolloutLatency/2 {
			first = i
		}
		longest = max(longest, at[i].Sub(at[first]))
	}
	return longest
}

// timeline is when each new pod went through each step, when each
// leaving pod's endpoint turned terminating and its backend was drained,
// when each work request was accepted and finished, and each OCI call,
// in seconds from the rollout's start; LBREGISTRAR_BENCH_TIMELINE names the file it is written to.
func (env *rolloutBench) timeline(r rolled) string {
	at := func(t time.Time, ok bool) string {
		if !ok {
			return "    -"
		}
		return fmt.Sprintf("%5.2f", t.Sub(r.start).Seconds())
	}
	var lines []string
	for pod, addr := range r.addresses {
		ready, okReady := env.shop.kubelet.containersReadyAt(pod)
		appeared, okAppeared := r.appeared[addr]
		registered, okRegistered := r.registered[addr]
		gated, okGated := r.gateTrue[pod]
		lines = append(lines, fmt.Sprintf("pod %-12s containers-ready %s endpoint %s registered %s gate %s",
			addr, at(ready, okReady), at(appeared, okAppeared), at(registered, okRegistered), at(gated, okGated)))
	}
	for addr, terminating := range r.terminated {
		drained, ok := r.drained[addr]
		lines = append(lines, fmt.Sprintf("drain %-12s terminating %s drained %s", addr, at(terminating, true), at(drained, ok)))
	}
	for _, wr := range r.wrs {
		lines = append(lines, fmt.Sprintf("work request accepted %s finished %s", at(wr.TimeAccepted, true), at(wr.TimeFinished, !wr.TimeFinished.IsZero())))
	}
	slices.Sort(lines)
	calls := make([]string, 0, len(r.calls))
	for _, c := range r.calls {
		calls = append(calls, fmt.Sprintf("%s %s %d", at(c.Time, true), c.Operation, c.Status))
	}
	slices.Sort(calls)
	return strings.Join(lines, "\n") + "\nOCI calls:\n" + strings.Join(calls, "\n") + "\n"
}

// sameEndpoint reports whether two endpoints' conditions are the same.
func sameEndpoint(a, b discoveryv1.EndpointConditions) bool {
	return ptr.Deref(a.Ready, true) == ptr.Deref(b.Ready, true) && ptr.Deref(a.Serving, true) == ptr.Deref(b.Serving, true) &&
		ptr.Deref(a.Terminating, false) == ptr.Deref(b.Terminating, false)
}

// startKubeProxy plays kube-proxy's part for ns's Service with
// externalTrafficPolicy: Local at nodePort: a node answers there only while
// it has a ready endpoint of its own (pkg/proxy: a Local Service's traffic
// goes to the node's own endpoints only; with none, it is dropped), at the
// node's loopback stand-in.
func startKubeProxy(b *testing.B, c *kube.Cluster, ns string, nodes []string, nodePort int) {
	ctx, stop := context.WithCancel(context.Background())
	listeners := map[string]net.Listener{}
	var mu sync.Mutex
	set := func(node string, answer bool) {
		mu.Lock()
		defer mu.Unlock()
		l, open := listeners[node]
		switch {
		case answer && !open:
			i := slices.Index(nodes, node)
			l, err := net.Listen("tcp", net.JoinHostPort(fmt.Sprintf("127.0.90.%d", i+1), fmt.Sprint(nodePort)))
			if err != nil {
				b.Errorf("node %s: %v", node, err)
				return
			}
			listeners[node] = l
			go func() {
				for {
					conn, err := l.Accept()
					if err != nil {
						return
					}
					conn.Close()
				}
			}()
		case !answer && open:
			l.Close()
			delete(listeners, node)
		}
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			var list discoveryv1.EndpointSliceList
			if err := c.Client.List(ctx, &list, client.InNamespace(ns)); err == nil {
				ready := map[string]bool{}
				for _, s := range list.Items {
					for _, ep := range s.Endpoints {
						if ptr.Deref(ep.Conditions.Ready, true) && ep.NodeName != nil {
							ready[*ep.NodeName] = true
						}
					}
				}
				for _, node := range nodes {
					set(node, ready[node])
				}
			}
			select {
			case <-ctx.Done():
			case <-time.After(50 * time.Millisecond):
			}
		}
	}()
	b.Cleanup(func() {
		stop()
		<-done
		for _, node := range nodes {
			set(node, false)
		}
	})
}
