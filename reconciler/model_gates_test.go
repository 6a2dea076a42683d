package reconciler_test

import (
	"fmt"
	"maps"
	"net"
	"slices"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"pgregory.net/rapid"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/peppy-ratio/lbregistrar/api/v1beta1"
)

// Gated pods in TestOwnershipModel: a Service "web" whose pods the
// resource "pods" registers into the classic load balancer's "health" set
// (checked on each backend's own port every 50 ms) and gates. Pods answer
// at loopback stand-ins of their addresses, healthy while a listener is
// open there. The model plays the kubelet (containers ready) and the
// EndpointSlice controller (a pod's endpoint is ready once its gate is
// True) and checks that a gate:
//
//   - turns True (LoadBalancerReady) only for a pod that has answered, with
//     its backend registered: never for a pod created again under the
//     name and address of one that was let through;
//   - turns True for every healthy pod while the resource can write;
//   - holds (LoadBalancerBlocked) while the resource is suspended, or
//     another resource claims the set (a Conflict).

// modelPodIPs are the pods' addresses.
var modelPodIPs = []string{"10.2.0.1", "10.2.0.2", "10.2.0.3"}

const modelPodSet, modelPodService = "health", "web"

// modelPod is a pod the sequence created and has not deleted.
type modelPod struct {
	name, ip string
	uid      string
	healthy  bool
	answered bool // its address has answered since it was created
}

// modelPods is what a sequence expects of its gated pods.
type modelPods struct {
	pods      map[string]*modelPod
	resource  string // the resource that registers and gates them
	suspended bool
	conflict  string // a later resource claiming the same set, "" for none
	port      int32
}

// podListeners are a world's loopback stand-ins of the pods' addresses
// (127.0.0.11 to .13 for the first world, .21 to .23 for the second), and
// the listeners open there.
type podListeners struct {
	port     int32
	standIns map[string]string // pod address -> stand-in
	open     map[string]net.Listener
}

func newPodListeners(world int) *podListeners {
	standIns := map[string]string{}
	for i, ip := range modelPodIPs {
		standIns[ip] = fmt.Sprintf("127.0.0.%d", 10*(world+1)+i+1)
	}
	l, err := net.Listen("tcp", standIns[modelPodIPs[0]]+":0")
	if err != nil {
		panic(err)
	}
	port := int32(l.Addr().(*net.TCPAddr).Port)
	l.Close()
	return &podListeners{port: port, standIns: standIns, open: map[string]net.Listener{}}
}

// set opens or closes the listener of ip's stand-in.
func (p *podListeners) set(ip string, up bool) error {
	addr := p.standIns[ip]
	if l := p.open[addr]; l != nil && !up {
		delete(p.open, addr)
		return l.Close()
	}
	if p.open[addr] != nil || !up {
		return nil
	}
	l, err := net.Listen("tcp", net.JoinHostPort(addr, strconv.Itoa(int(p.port))))
	if err != nil {
		return err
	}
	go acceptAndClose(l, nil)
	p.open[addr] = l
	return nil
}

func (p *podListeners) closeAll() {
	for _, ip := range modelPodIPs {
		_ = p.set(ip, false)
	}
}

// beginPods resets the gated pods' world: no pod, no slice, the Service,
// every listener closed, and the resource that registers them.
func (m *model) beginPods() {
	f := m.w.f
	m.w.listeners.closeAll()
	f.must(f.api.DeleteAllOf(f.ctx, &corev1.Pod{}, client.InNamespace(f.ns), client.GracePeriodSeconds(0)))
	f.must(client.IgnoreNotFound(f.api.Delete(f.ctx, &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: modelPodService + "-pods"}})))
	f.eventually(30*time.Second, func() error {
		var pods corev1.PodList
		f.must(f.api.List(f.ctx, &pods, client.InNamespace(f.ns)))
		if len(pods.Items) > 0 {
			return fmt.Errorf("%d pods left from the last sequence", len(pods.Items))
		}
		return nil
	})
	if err := f.api.Get(f.ctx, client.ObjectKey{Namespace: f.ns, Name: modelPodService}, &corev1.Service{}); apierrors.IsNotFound(err) {
		f.clusterIPService(modelPodService)
	}
	m.gated = &modelPods{pods: map[string]*modelPod{}, resource: m.prefix + "-pods", port: m.w.listeners.port}
	f.must(f.api.Create(f.ctx, &v1beta1.LBRegistrar{ObjectMeta: metav1.ObjectMeta{Name: m.gated.resource},
		Spec: v1beta1.LBRegistrarSpec{LoadBalancerID: classicLB, APIKey: f.key.DeepCopy(), Services: []v1beta1.Target{podTargetOf(f.ns, modelPodService, modelPodSet, 1)}}}))
}

// podCreate creates a gated pod at a free address, answering or not.
func (m *model) podCreate(rt *rapid.T) {
	used := map[string]bool{}
	for _, p := range m.gated.pods {
		used[p.ip] = true
	}
	free := slices.DeleteFunc(slices.Clone(modelPodIPs), func(ip string) bool { return used[ip] })
	if len(free) == 0 {
		rt.Skip("every address has a pod")
	}
	name := fmt.Sprintf("web-%d", m.next())
	m.startPod(rt, name, rapid.SampledFrom(free).Draw(rt, "ip"))
}

// startPod creates pod name at ip, as the webhook gates it and its kubelet
// reports its containers ready, answering as drawn.
func (m *model) startPod(rt *rapid.T, name, ip string) {
	f := m.w.f
	healthy := rapid.Bool().Draw(rt, "healthy")
	f.must(m.w.listeners.set(ip, healthy))
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: name, Labels: map[string]string{"app": modelPodService, v1beta1.ReadinessGateLabel: ""}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "app"}}, ReadinessGates: []corev1.PodReadinessGate{{ConditionType: v1beta1.ReadinessGate}}}}
	f.must(f.api.Create(f.ctx, pod))
	f.must(retry.RetryOnConflict(retry.DefaultRetry, func() error {
		f.must(f.api.Get(f.ctx, client.ObjectKeyFromObject(pod), pod))
		pod.Status.PodIP = ip
		pod.Status.Conditions = append(pod.Status.Conditions, corev1.PodCondition{Type: corev1.ContainersReady, Status: corev1.ConditionTrue})
		return f.api.Status().Update(f.ctx, pod)
	}))
	m.gated.pods[name] = &modelPod{name: name, ip: ip, uid: string(pod.UID), healthy: healthy, answered: healthy}
	m.syncPodSlice()
}

func (m *model) pickPod(rt *rapid.T) *modelPod {
	if len(m.gated.pods) == 0 {
		rt.Skip("no pod")
	}
	return m.gated.pods[rapid.SampledFrom(slices.Sorted(maps.Keys(m.gated.pods))).Draw(rt, "pod")]
}

// podDelete deletes a pod; its endpoint goes.
func (m *model) podDelete(rt *rapid.T) {
	p := m.pickPod(rt)
	m.deletePod(p)
	m.syncPodSlice()
}

func (m *model) deletePod(p *modelPod) {
	f := m.w.f
	f.must(client.IgnoreNotFound(f.api.Delete(f.ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: p.name}}, client.GracePeriodSeconds(0))))
	f.eventually(10*time.Second, func() error {
		if err := f.api.Get(f.ctx, client.ObjectKey{Namespace: f.ns, Name: p.name}, &corev1.Pod{}); !apierrors.IsNotFound(err) {
			return fmt.Errorf("pod %s not gone yet: %w", p.name, err)
		}
		return nil
	})
	delete(m.gated.pods, p.name)
}

// podRecreate deletes a pod and creates it again under its name, at its
// address, as a StatefulSet does: the new pod answering or not.
func (m *model) podRecreate(rt *rapid.T) {
	p := m.pickPod(rt)
	m.deletePod(p)
	m.syncPodSlice()
	m.startPod(rt, p.name, p.ip)
}

// podFlap makes a pod stop or start answering.
func (m *model) podFlap(rt *rapid.T) {
	p := m.pickPod(rt)
	p.healthy = !p.healthy
	p.answered = p.answered || p.healthy
	m.w.f.must(m.w.listeners.set(p.ip, p.healthy))
}

// podSuspend suspends the pods' resource, or resumes it.
func (m *model) podSuspend(*rapid.T) {
	m.gated.suspended = !m.gated.suspended
	m.w.f.updateRegistrar(m.obj(m.gated.resource), func(o *v1beta1.LBRegistrar) { o.Spec.Suspend = m.gated.suspended })
}

// podConflict creates a later resource claiming the pods' set (a
// Conflict), or deletes it.
func (m *model) podConflict(*rapid.T) {
	f := m.w.f
	if m.gated.conflict != "" {
		f.must(f.api.Delete(f.ctx, m.obj(m.gated.conflict)))
		m.gated.conflict = ""
		return
	}
	m.gated.conflict = fmt.Sprintf("%s-c%d", m.prefix, m.next())
	f.must(f.api.Create(f.ctx, &v1beta1.LBRegistrar{ObjectMeta: metav1.ObjectMeta{Name: m.gated.conflict},
		Spec: v1beta1.LBRegistrarSpec{LoadBalancerID: classicLB, APIKey: f.key.DeepCopy(), Services: []v1beta1.Target{podTargetOf(f.ns, modelPodService, modelPodSet, 1)}}}))
}

// syncPodSlice writes the Service's EndpointSlice as the EndpointSlice
// controller would from the pods as they are: each pod's endpoint, ready
// once the pod is (its containers ready and its gate True). It returns
// the pods it read, by name.
func (m *model) syncPodSlice() map[string]*corev1.Pod {
	f := m.w.f
	var pods corev1.PodList
	f.must(f.api.List(f.ctx, &pods, client.InNamespace(f.ns), client.MatchingLabels{"app": modelPodService}))
	eps := []discoveryv1.Endpoint{}
	for _, p := range pods.Items {
		if p.DeletionTimestamp != nil || p.Status.PodIP == "" {
			continue
		}
		ready := gateOf(&p).Status == corev1.ConditionTrue
		eps = append(eps, discoveryv1.Endpoint{Addresses: []string{p.Status.PodIP}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(ready), Serving: ptr.To(ready), Terminating: ptr.To(false)},
			TargetRef: &corev1.ObjectReference{Kind: "Pod", Namespace: p.Namespace, Name: p.Name, UID: p.UID}})
	}
	slices.SortFunc(eps, func(a, b discoveryv1.Endpoint) int { return compareStrings(a.Addresses[0], b.Addresses[0]) })
	s := &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: modelPodService + "-pods"}}
	_, err := ctrl.CreateOrUpdate(f.ctx, f.api, s, func() error {
		s.Labels = map[string]string{discoveryv1.LabelServiceName: modelPodService}
		s.AddressType = discoveryv1.AddressTypeIPv4
		s.Ports = []discoveryv1.EndpointPort{{Name: ptr.To("http"), Port: ptr.To(m.gated.port), Protocol: ptr.To(corev1.ProtocolTCP)}}
		s.Endpoints = eps
		return nil
	})
	f.must(err)
	byName := map[string]*corev1.Pod{}
	for i := range pods.Items {
		byName[pods.Items[i].Name] = &pods.Items[i]
	}
	return byName
}

func compareStrings(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// gateOf is pod's gate condition, empty when it has none yet.
func gateOf(pod *corev1.Pod) corev1.PodCondition {
	for _, c := range pod.Status.Conditions {
		if c.Type == v1beta1.ReadinessGate {
			return c
		}
	}
	return corev1.PodCondition{}
}

// gatesSafe checks what must hold at every moment: a gate True because
// the load balancer has the pod is a pod that has answered, with its
// backend registered. pods are the pods as syncPodSlice read them.
func (m *model) gatesSafe(pods map[string]*corev1.Pod) error {
	registered := m.w.f.backends(classicLB, modelPodSet)
	for _, p := range m.gated.pods {
		pod := pods[p.name]
		if pod == nil {
			return fmt.Errorf("pod %s is gone", p.name)
		}
		if string(pod.UID) != p.uid {
			return fmt.Errorf("pod %s is not the one the model created", p.name)
		}
		g := gateOf(pod)
		if g.Status != corev1.ConditionTrue || g.Reason != v1beta1.ReasonLoadBalancerReady {
			continue
		}
		if !p.answered {
			return fmt.Errorf("pod %s (at %s, never answered) was let through: %s", p.name, p.ip, g.Message)
		}
		want := fmt.Sprintf("%s:%d/1", p.ip, m.gated.port)
		if !slices.Contains(registered, want) {
			return fmt.Errorf("pod %s was let through but %s holds %v, not %s", p.name, modelPodSet, registered, want)
		}
	}
	return nil
}

// gatesSettled is nil once every gate says what the model expects: True
// for a pod that answers while its resource can write; held, saying so,
// while the resource is suspended or in a Conflict; waiting otherwise.
func (m *model) gatesSettled() error {
	pods := m.syncPodSlice()
	if err := m.gatesSafe(pods); err != nil {
		return err
	}
	for _, p := range m.gated.pods {
		g := gateOf(pods[p.name])
		switch {
		case g.Status == corev1.ConditionTrue:
		case m.gated.suspended || m.gated.conflict != "":
			if g.Reason != v1beta1.ReasonLoadBalancerBlocked {
				return fmt.Errorf("pod %s's gate: %s %q, want held (suspended %t, conflict %q)", p.name, g.Reason, g.Message, m.gated.suspended, m.gated.conflict)
			}
		case p.healthy:
			return fmt.Errorf("pod %s answers, but its gate is %s %s %q", p.name, g.Status, g.Reason, g.Message)
		case g.Status != corev1.ConditionFalse || g.Reason != v1beta1.ReasonLoadBalancerPending:
			return fmt.Errorf("pod %s does not answer; its gate: %s %s %q, want waiting", p.name, g.Status, g.Reason, g.Message)
		}
	}
	return nil
}
