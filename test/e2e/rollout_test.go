package e2e

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"slices"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/peppy-ratio/lbregistrar/api/v1beta1"
	"github.com/peppy-ratio/lbregistrar/test/eventually"
	"github.com/peppy-ratio/lbregistrar/test/kube"
	"github.com/peppy-ratio/lbregistrar/test/ociemu"
)

// rolloutPort is the pods' container port, on each pod's own loopback
// stand-in address; rolloutNode is the node they run on.
const (
	rolloutPort = 18080
	rolloutNode = "node-a"
)

// kubelet plays the kubelets of its nodes for the pods of one namespace,
// there being none, each node's pods apart from the others': it binds
// each new pod to its nodes in turn (there is no scheduler either), gives
// it the next address of its pool, runs its
// "container" (an HTTP server at the address's loopback stand-in) when
// serve says so, marks its containers ready, and keeps its Ready
// condition as the kubelet computes it: containers ready and every
// readiness gate True (ReadinessGatesNotReady while one is not). A pod
// being deleted keeps serving for stopAfter (its containers shutting
// down; none by default), then stops and is removed.
type kubelet struct {
	c         *kube.Cluster
	namespace string
	nodes     []string
	addresses []string          // pod addresses, in order of use
	standIns  map[string]string // address -> loopback stand-in
	stopAfter time.Duration
	every     time.Duration // how often the pods are looked at

	mu       sync.Mutex
	serve    bool                    // whether pods started from now on answer
	servers  map[string]*http.Server // by pod name
	next     int
	bound    int
	deleting map[string]time.Time // when each pod was first seen being deleted
	ready    map[string]time.Time // when each pod's containers were marked ready
}

// newKubelet is the kubelet of namespace's pods on rolloutNode, with a
// pool of n addresses 10.<pool>.90.1 on, each standing in at 127.<pool>.90.1 on.
func newKubelet(c *kube.Cluster, namespace string, pool, n int) *kubelet {
	k := &kubelet{c: c, namespace: namespace, nodes: []string{rolloutNode}, standIns: map[string]string{},
		servers: map[string]*http.Server{}, serve: true, every: 100 * time.Millisecond,
		deleting: map[string]time.Time{}, ready: map[string]time.Time{}}
	for i := range n {
		host := fmt.Sprintf("%d.%d.%d", pool, 90+i/250, i%250+1)
		k.addresses = append(k.addresses, "10."+host)
		k.standIns["10."+host] = "127." + host
	}
	return k
}

// containersReadyAt is when the kubelet marked pod's containers ready.
func (k *kubelet) containersReadyAt(pod string) (time.Time, bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	at, ok := k.ready[pod]
	return at, ok
}

// answering says whether the pods started from now on answer on their port.
func (k *kubelet) answering(serve bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.serve = serve
}

// startAnswering starts the servers of the running pods that have none.
func (k *kubelet) startAnswering(t testing.TB) {
	k.mu.Lock()
	k.serve = true
	k.mu.Unlock()
	var pods corev1.PodList
	if err := k.c.Client.List(testContext(t), &pods, client.InNamespace(k.namespace)); err != nil {
		t.Fatal(err)
	}
	for _, p := range pods.Items {
		if p.Status.PodIP != "" && p.DeletionTimestamp == nil {
			k.listen(t, p.Name, p.Status.PodIP)
		}
	}
}

func (k *kubelet) listen(t testing.TB, pod, ip string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if _, ok := k.servers[pod]; ok || !k.serve {
		return
	}
	l, err := net.Listen("tcp", net.JoinHostPort(k.standIns[ip], fmt.Sprint(rolloutPort)))
	if err != nil {
		t.Errorf("pod %s: %v", pod, err)
		return
	}
	s := &http.Server{ReadHeaderTimeout: time.Second, Handler: http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})}
	k.servers[pod] = s
	go func() { _ = s.Serve(l) }() // ends with the listener
}

func (k *kubelet) stop(pod string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if s, ok := k.servers[pod]; ok {
		s.Close()
		delete(k.servers, pod)
	}
}

// run keeps the namespace's pods until ctx ends.
func (k *kubelet) run(ctx context.Context, t testing.TB) {
	defer func() {
		k.mu.Lock()
		defer k.mu.Unlock()
		for _, s := range k.servers {
			s.Close()
		}
	}()
	for ctx.Err() == nil {
		var pods corev1.PodList
		if err := k.c.Client.List(ctx, &pods, client.InNamespace(k.namespace)); err == nil {
			// Each node has its own kubelet, and the scheduler binds pods
			// apart from them: the pods of different nodes (and those not
			// bound yet) are synced side by side, each node's one by one.
			byNode := map[string][]*corev1.Pod{}
			for i := range pods.Items {
				byNode[pods.Items[i].Spec.NodeName] = append(byNode[pods.Items[i].Spec.NodeName], &pods.Items[i])
			}
			var wg sync.WaitGroup
			for _, onNode := range byNode {
				wg.Go(func() {
					for _, p := range onNode {
						k.sync(ctx, t, p)
					}
				})
			}
			wg.Wait()
		}
		select {
		case <-ctx.Done():
		case <-time.After(k.every):
		}
	}
}

func (k *kubelet) sync(ctx context.Context, t testing.TB, p *corev1.Pod) {
	if p.DeletionTimestamp != nil {
		k.mu.Lock()
		since, seen := k.deleting[p.Name]
		if !seen {
			since = time.Now()
			k.deleting[p.Name] = since
		}
		k.mu.Unlock()
		if time.Since(since) >= k.stopAfter {
			k.stop(p.Name)
			_ = k.c.Client.Delete(ctx, p, client.GracePeriodSeconds(0))
		}
		return
	}
	if p.Spec.NodeName == "" {
		// There is no scheduler: the pod is bound to a node, as the
		// scheduler would through the binding subresource.
		k.mu.Lock()
		node := k.nodes[k.bound%len(k.nodes)]
		k.bound++
		k.mu.Unlock()
		_ = k.c.Client.SubResource("binding").Create(ctx, p, &corev1.Binding{
			ObjectMeta: metav1.ObjectMeta{Namespace: p.Namespace, Name: p.Name},
			Target:     corev1.ObjectReference{Kind: "Node", Name: node}})
		return // seen bound on the next pass
	}
	changed, started := false, false
	if p.Status.PodIP == "" {
		k.mu.Lock()
		if k.next == len(k.addresses) {
			k.mu.Unlock()
			t.Errorf("no address left for pod %s", p.Name)
			return
		}
		ip := k.addresses[k.next]
		k.next++
		k.mu.Unlock()
		p.Status.Phase, p.Status.PodIP, p.Status.PodIPs = corev1.PodRunning, ip, []corev1.PodIP{{IP: ip}}
		k.listen(t, p.Name, ip)
		for _, c := range []corev1.PodConditionType{corev1.PodScheduled, corev1.PodInitialized, corev1.ContainersReady} {
			setPodCondition(p, c, true)
		}
		changed, started = true, true
	}
	ready := true
	for _, g := range p.Spec.ReadinessGates {
		ready = ready && slices.ContainsFunc(p.Status.Conditions, func(c corev1.PodCondition) bool {
			return c.Type == g.ConditionType && c.Status == corev1.ConditionTrue
		})
	}
	changed = setPodCondition(p, corev1.PodReady, ready) || changed
	if i := slices.IndexFunc(p.Status.Conditions, func(c corev1.PodCondition) bool { return c.Type == corev1.PodReady }); !ready {
		p.Status.Conditions[i].Reason = "ReadinessGatesNotReady" // as the kubelet says it (pkg/kubelet/status)
	} else {
		p.Status.Conditions[i].Reason = ""
	}
	if !changed {
		return
	}
	if err := k.c.Client.Status().Update(ctx, p); err == nil && started {
		k.mu.Lock()
		k.ready[p.Name] = time.Now()
		k.mu.Unlock()
	} // a conflict is tried again on the next pass
}

// setPodCondition sets a condition's status, reporting whether it changed.
func setPodCondition(p *corev1.Pod, typ corev1.PodConditionType, isTrue bool) bool {
	status := corev1.ConditionFalse
	if isTrue {
		status = corev1.ConditionTrue
	}
	for i := range p.Status.Conditions {
		if p.Status.Conditions[i].Type == typ {
			if p.Status.Conditions[i].Status == status {
				return false
			}
			p.Status.Conditions[i].Status, p.Status.Conditions[i].LastTransitionTime = status, metav1.Now()
			return true
		}
	}
	p.Status.Conditions = append(p.Status.Conditions, corev1.PodCondition{Type: typ, Status: status, LastTransitionTime: metav1.Now()})
	return true
}

// A Deployment's rolling update (maxUnavailable 0) waits for the readiness
// gate: with the real Deployment, ReplicaSet and EndpointSlice controllers
// (kube-controller-manager), a new pod whose port does not answer is
// registered but never found healthy, so its gate stays False, the old
// pods keep serving and the rollout does not move on; once it answers,
// the gate goes True and the rollout completes, the load balancer having
// the new pods. Scaled to zero, the pods' backends leave.
func TestRolloutWaitsForTheReadinessGate(t *testing.T) {
	t.Parallel()
	c := kube.Start(t, kube.Options{Bare: true})
	k := newKubelet(c, "shop", 1, 8)
	emu := ociemu.StartSeeded(t, mustRoot(t)+"/cmd/localrun/seed.yaml", ociemu.Options{Region: "ap-tokyo-1", WorkRequestLatency: 200 * time.Millisecond, StandIns: k.standIns})
	kubectl(t, c, "", "create", "namespace", kube.Namespace)
	addNode(t, c, rolloutNode, "10.0.90.1")
	serveAdmitting(t, c, emu, "--node-drain-period=3s")
	c.StartControllerManager(t, "deployment-controller", "replicaset-controller", "endpointslice-controller")
	ctx := testContext(t)
	if err := c.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "shop",
		Labels: map[string]string{v1beta1.ReadinessGatesNamespaceLabel: v1beta1.ReadinessGatesEnabled}}}); err != nil {
		t.Fatal(err)
	}
	if err := c.Client.Create(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web"},
		Spec: corev1.ServiceSpec{Selector: map[string]string{"app": "web"},
			Ports: []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromInt32(rolloutPort)}}}}); err != nil {
		t.Fatal(err)
	}
	kubectl(t, c, apiKeyFor(t, c, emu, webPodsRegistrar), "apply", "-f", "-")
	kctx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); k.run(kctx, t) }()
	t.Cleanup(func() { stop(); <-done })

	deploy := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web"}, Spec: appsv1.DeploymentSpec{
		Replicas: ptr.To[int32](2),
		Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
		Strategy: appsv1.DeploymentStrategy{Type: appsv1.RollingUpdateDeploymentStrategyType, RollingUpdate: &appsv1.RollingUpdateDeployment{
			MaxUnavailable: ptr.To(intstr.FromInt32(0)), MaxSurge: ptr.To(intstr.FromInt32(1))}},
		Template: corev1.PodTemplateSpec{
			ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web"}, Annotations: map[string]string{"version": "1"}},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "web",
				Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: rolloutPort}}}}},
		},
	}}
	if err := c.Client.Create(ctx, deploy); err != nil {
		t.Fatal(err)
	}
	complete := func(generation int64) error {
		var d appsv1.Deployment
		if err := c.Client.Get(ctx, client.ObjectKeyFromObject(deploy), &d); err != nil {
			return err
		}
		if s := d.Status; d.Generation != generation || s.ObservedGeneration != generation || s.UpdatedReplicas != 2 || s.AvailableReplicas != 2 || s.Replicas != 2 {
			return fmt.Errorf("deployment generation %d: %+v", d.Generation, s)
		}
		return nil
	}
	eventually.Passes(t, 3*time.Minute, 250*time.Millisecond, func() error { return complete(1) })
	first := servingPods(t, c)
	t.Cleanup(func() {
		if t.Failed() {
			for _, what := range []string{"pods", "endpointslices", "lbregistrars"} {
				out, _, _ := c.Kubectl(context.Background(), "", "get", what, "-A", "-o", "yaml")
				t.Logf("%s:\n%s", what, out)
			}
		}
	})
	waitBackends(t, emu, "web-pods", time.Minute, first...)

	// The new pod does not answer: its gate stays False, and the rollout waits.
	k.answering(false)
	var cur appsv1.Deployment
	if err := c.Client.Get(ctx, client.ObjectKeyFromObject(deploy), &cur); err != nil {
		t.Fatal(err)
	}
	cur.Spec.Template.Annotations["version"] = "2"
	if err := c.Client.Update(ctx, &cur); err != nil {
		t.Fatal(err)
	}
	time.Sleep(10 * time.Second)
	if err := complete(2); err == nil {
		t.Fatal("the rollout completed with a new pod the load balancer finds unhealthy")
	}
	if now := servingPods(t, c); !slices.Equal(now, first) {
		t.Errorf("serving pods while the rollout waited: %v, want the old ones %v", now, first)
	}

	k.startAnswering(t)
	eventually.Passes(t, 3*time.Minute, 250*time.Millisecond, func() error { return complete(2) })
	last := servingPods(t, c)
	if slices.ContainsFunc(last, func(b string) bool { return slices.Contains(first, b) }) {
		t.Errorf("after the rollout the Ready pods are %v; the old ones were %v", last, first)
	}

	// Scaled to zero: the EndpointSlice controller keeps its placeholder
	// slice, and the gone pods' backends are drained, then removed.
	if err := c.Client.Get(ctx, client.ObjectKeyFromObject(deploy), &cur); err != nil {
		t.Fatal(err)
	}
	cur.Spec.Replicas = ptr.To[int32](0)
	if err := c.Client.Update(ctx, &cur); err != nil {
		t.Fatal(err)
	}
	waitBackends(t, emu, "web-pods", time.Minute)
}

// servingPods are the Ready pods of shop, as the load balancer's backends
// (address:port), sorted.
func servingPods(t *testing.T, c *kube.Cluster) []string {
	t.Helper()
	var pods corev1.PodList
	if err := c.Client.List(testContext(t), &pods, client.InNamespace("shop")); err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, p := range pods.Items {
		if p.DeletionTimestamp == nil && slices.ContainsFunc(p.Status.Conditions, func(c corev1.PodCondition) bool {
			return c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue
		}) {
			out = append(out, net.JoinHostPort(p.Status.PodIP, fmt.Sprint(rolloutPort)))
		}
	}
	slices.Sort(out)
	return out
}
