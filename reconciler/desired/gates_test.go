package desired

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/peppy-ratio/lbregistrar/api/v1beta1"
)

// gatedPod is a pod with lbregistrar's readiness gate, its containers
// ready or not, the gate's condition as given ("" for none).
func gatedPod(name string, containersReady bool, gate corev1.ConditionStatus) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID("uid-" + name)},
		Spec: corev1.PodSpec{ReadinessGates: []corev1.PodReadinessGate{{ConditionType: v1beta1.ReadinessGate}}}}
	cr := corev1.ConditionFalse
	if containersReady {
		cr = corev1.ConditionTrue
	}
	p.Status.Conditions = []corev1.PodCondition{{Type: corev1.ContainersReady, Status: cr}}
	if gate != "" {
		p.Status.Conditions = append(p.Status.Conditions, corev1.PodCondition{Type: v1beta1.ReadinessGate, Status: gate})
	}
	return p
}

// endpointOf is p's endpoint at ip on node, not ready (as a pod waiting
// for a gate is), terminating or not.
func endpointOf(p *corev1.Pod, ip, node string, terminating bool) discoveryv1.Endpoint {
	return discoveryv1.Endpoint{Addresses: []string{ip}, NodeName: ptr.To(node),
		Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(false), Terminating: ptr.To(terminating)},
		TargetRef:  &corev1.ObjectReference{Kind: "Pod", Namespace: p.Namespace, Name: p.Name, UID: p.UID}}
}

// A pod whose node the node lifecycle controller cannot reach is marked
// not Ready by its status alone: no longer ready but for the gate, though
// its containers were ready and its gate True. One the kubelet keeps not
// Ready for the gate (ReadinessGatesNotReady) still is.
func TestReadyButForGate(t *testing.T) {
	withReady := func(p *corev1.Pod, status corev1.ConditionStatus, reason string) *corev1.Pod {
		p.Status.Conditions = append(p.Status.Conditions, corev1.PodCondition{Type: corev1.PodReady, Status: status, Reason: reason})
		return p
	}
	for _, tt := range []struct {
		pod  *corev1.Pod
		want bool
	}{
		{gatedPod("waiting-for-the-gate", true, corev1.ConditionFalse), true},
		{withReady(gatedPod("kubelet-lagging", true, corev1.ConditionTrue), corev1.ConditionFalse, kubeletGatesNotReady), true},
		{withReady(gatedPod("ready", true, corev1.ConditionTrue), corev1.ConditionTrue, ""), true},
		{withReady(gatedPod("node-unreachable", true, corev1.ConditionTrue), corev1.ConditionFalse, ""), false},
		{gatedPod("starting", false, ""), false},
	} {
		if got := ReadyButForGate(tt.pod); got != tt.want {
			t.Errorf("ReadyButForGate(%s) = %t, want %t", tt.pod.Name, got, tt.want)
		}
	}
}

func TestAwaitsGate(t *testing.T) {
	ungated := gatedPod("plain", true, "")
	ungated.Spec.ReadinessGates = nil
	deleting := gatedPod("deleting", true, corev1.ConditionFalse)
	deleting.DeletionTimestamp = &metav1.Time{}
	for _, tt := range []struct {
		pod  *corev1.Pod
		want bool
	}{
		{gatedPod("waiting", true, corev1.ConditionFalse), true},
		{gatedPod("no-condition-yet", true, ""), true},
		{gatedPod("starting", false, ""), false},
		{gatedPod("through", true, corev1.ConditionTrue), false},
		{ungated, false},
		{deleting, false},
	} {
		if got := AwaitsGate(tt.pod); got != tt.want {
			t.Errorf("AwaitsGate(%s) = %t, want %t", tt.pod.Name, got, tt.want)
		}
	}
}

// A pod ready but for the gate is registered as though ready, by Pod
// targets and by node targets that follow the endpoints: one that waits
// for the gate, and one whose gate just turned True while its endpoint
// does not show it yet (the kubelet and the EndpointSlice controller
// lagging: its backend must not be drained meanwhile). One that is
// starting, terminating, or not the pod the endpoint names (another UID)
// is not.
func TestPodsAwaitingTheGateAreRegistered(t *testing.T) {
	waiting, starting, through := gatedPod("waiting", true, corev1.ConditionFalse), gatedPod("starting", false, ""), gatedPod("through", true, corev1.ConditionTrue)
	recreated := gatedPod("recreated", true, corev1.ConditionFalse)
	stale := endpointOf(recreated, "10.1.0.5", "e", false)
	stale.TargetRef.UID = "uid-before"
	gated := GatedPods{}
	for _, p := range []*corev1.Pod{waiting, starting, through, recreated} {
		gated[types.NamespacedName{Namespace: p.Namespace, Name: p.Name}] = p
	}
	slice := gwSlice(endpointOf(waiting, "10.1.0.1", "a", false), endpointOf(starting, "10.1.0.2", "b", false),
		endpointOf(waiting, "10.1.0.3", "c", true), endpointOf(through, "10.1.0.4", "d", false), stale)
	svc := mkService("ns", "gw", corev1.ServiceTypeNodePort, corev1.ServicePort{Name: "https", Port: 443, NodePort: 30443})
	https := &svc.Spec.Ports[0]

	backends, _ := podEndpoints(gwKey, https, []*discoveryv1.EndpointSlice{slice}, IPv4, podView{}, gated)
	if len(backends) != 2 || backends[0].IP != "10.1.0.1" || backends[1].IP != "10.1.0.4" {
		t.Errorf("pod backends %v, want 10.1.0.1 and 10.1.0.4", backends)
	}
	if got := slices.Sorted(maps.Keys(ServingNodes(gwKey, https, []*discoveryv1.EndpointSlice{slice}, gated, true))); !slices.Equal(got, []string{"a", "d"}) {
		t.Errorf("serving nodes %v, want [a d]", got)
	}
	if backends, _ := podEndpoints(gwKey, https, []*discoveryv1.EndpointSlice{slice}, IPv4, podView{}, nil); len(backends) != 0 {
		t.Errorf("without the gated pods, backends %v, want none", backends)
	}
}

// A trimmed pod decides the same: its gate, its conditions, its deletion.
func TestTrimPodKeepsWhatTheGateReads(t *testing.T) {
	for _, p := range []*corev1.Pod{gatedPod("waiting", true, corev1.ConditionFalse), gatedPod("starting", false, ""), gatedPod("through", true, corev1.ConditionTrue)} {
		p.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "kubelet"}}
		p.Annotations = map[string]string{"kubectl.kubernetes.io/restartedAt": "now"}
		p.Spec.Containers = []corev1.Container{{Name: "app", Image: "app"}}
		p.Spec.NodeName = "a"
		p.Status.Conditions = append(p.Status.Conditions, corev1.PodCondition{Type: corev1.PodScheduled, Status: corev1.ConditionTrue})
		p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "app", Ready: true}}
		trimmed := TrimPod(p.DeepCopy())
		if AwaitsGate(trimmed) != AwaitsGate(p) || !HasGate(trimmed) || trimmed.Spec.NodeName != "a" || trimmed.UID != p.UID {
			t.Errorf("%s trimmed decides otherwise: %+v", p.Name, trimmed)
		}
		if len(trimmed.Spec.Containers) != 0 || trimmed.ManagedFields != nil || trimmed.Annotations != nil || len(trimmed.Status.ContainerStatuses) != 0 {
			t.Errorf("%s trimmed keeps what the gate never reads: %+v", p.Name, trimmed)
		}
	}
}

// What Compute makes of each gated pod (Stand) is the one answer the
// gates decide from: a pod whose backend Compute will not write is
// skipped, with why, for every reason Compute has; one it writes stands
// by that backend; one its slices do not list is not there (its gate
// waits); a held target says nothing of its pods (the set's hold does).
func TestStands(t *testing.T) {
	https := intstr.FromString("https")
	pod := gatedPod("web-1", true, "")
	other := gatedPod("web-2", true, "")
	unlisted := gatedPod("new", true, "")
	nodes := []*corev1.Node{
		mkNode("a", "10.0.0.1", label("pool", "ingress")), mkNode("b", "10.0.0.2"), mkNode("c", "10.0.0.3", label("pool", "ingress"), excluded),
		mkNode("d", "10.0.0.4", label("pool", "ingress"), autoscaled), mkNode("e", "10.0.0.5", label("pool", "ingress"), notReady),
		mkNode("f", "10.0.0.6", label("pool", "ingress"), podCIDR("10.244.6.0/24")),
	}
	byName := map[string]*corev1.Node{}
	for _, n := range nodes {
		byName[n.Name] = n
	}
	ready := func(ip, node string) discoveryv1.Endpoint {
		ep := endpointOf(gatedPod("old-"+ip, true, corev1.ConditionTrue), ip, node, false)
		ep.Conditions.Ready = ptr.To(true)
		return ep
	}
	filtered := func() v1beta1.Target { t := svcTarget(https, "nodes", 1); t.FilterByEndpoints = true; return t }
	selector := &metav1.LabelSelector{MatchLabels: map[string]string{"pool": "ingress"}}
	for _, tt := range []struct {
		name     string
		target   v1beta1.Target
		selector *metav1.LabelSelector
		local    bool
		slices   []*discoveryv1.EndpointSlice
		takes    Takes
		want     Stand // of pod; target 0
		listed   bool  // want a stand of pod at all
	}{
		{"node target: its node", filtered(), selector, false, []*discoveryv1.EndpointSlice{gwSlice(endpointOf(pod, "10.1.0.7", "a", false), ready("10.1.0.8", "a"))}, Takes{},
			Stand{Backends: []string{"10.0.0.1:30443"}, Healthy: true}, true},
		{"node target: its node not selected", filtered(), selector, false, []*discoveryv1.EndpointSlice{gwSlice(endpointOf(pod, "10.1.0.7", "b", false), ready("10.1.0.8", "a"))}, Takes{},
			Stand{Skip: "its node b is not selected by spec.nodeSelector"}, true},
		{"node target: its node excluded", filtered(), nil, false, []*discoveryv1.EndpointSlice{gwSlice(endpointOf(pod, "10.1.0.7", "c", false), ready("10.1.0.8", "a"))}, Takes{},
			Stand{Skip: "its node c is excluded from load balancers"}, true},
		{"node target: its node leaving", filtered(), nil, false, []*discoveryv1.EndpointSlice{gwSlice(endpointOf(pod, "10.1.0.7", "d", false), ready("10.1.0.8", "a"))}, Takes{},
			Stand{Skip: "its node d is leaving (taint " + TaintToBeDeletedByClusterAutoscaler + ")"}, true},
		{"node target: its node has no IPv6 address", filtered(), nil, false, []*discoveryv1.EndpointSlice{gwSlice(endpointOf(pod, "10.1.0.7", "a", false), ready("10.1.0.8", "a"))}, Takes{Family: IPv6},
			Stand{Skip: "its node a has no IPv6 address"}, true},
		{"node target: the only endpoint, so registration suffices", filtered(), nil, false, []*discoveryv1.EndpointSlice{gwSlice(endpointOf(pod, "10.1.0.7", "a", false))}, Takes{},
			Stand{Backends: []string{"10.0.0.1:30443"}}, true},
		{"Local: another ready elsewhere only", svcTarget(https, "nodes", 1), nil, true, []*discoveryv1.EndpointSlice{gwSlice(endpointOf(pod, "10.1.0.7", "a", false), ready("10.1.0.8", "b"))}, Takes{},
			Stand{Backends: []string{"10.0.0.1:30443"}}, true},
		{"Local: another ready on its node", svcTarget(https, "nodes", 1), nil, true, []*discoveryv1.EndpointSlice{gwSlice(endpointOf(pod, "10.1.0.7", "a", false), ready("10.1.0.8", "a"))}, Takes{},
			Stand{Backends: []string{"10.0.0.1:30443"}, Healthy: true}, true},
		{"Pod target: its endpoint", podTarget(https, "pods", 1), nil, false, []*discoveryv1.EndpointSlice{gwSlice(endpointOf(pod, "10.1.0.7", "a", false))}, Takes{},
			Stand{Backends: []string{"10.1.0.7:8443"}, Healthy: true}, true},
		{"Pod target: only an IPv6 endpoint for an IPv4 set", podTarget(https, "pods", 1), nil, false,
			[]*discoveryv1.EndpointSlice{withPorts(sliceOf("ns", "gw", discoveryv1.AddressTypeIPv6, endpointOf(pod, "fd00::7", "a", false)), gwSlice().Ports...), gwSlice(endpointOf(other, "10.1.0.9", "a", false))}, Takes{},
			Stand{Skip: "its address fd00::7 is not IPv4"}, true},
		{"Pod target: on an overlay", podTarget(https, "pods", 1), nil, false, []*discoveryv1.EndpointSlice{gwSlice(endpointOf(pod, "10.244.6.7", "f", false), endpointOf(other, "10.1.0.9", "a", false))}, Takes{},
			Stand{Skip: "pod range of node f"}, true},
		{"Pod target: listed without the port", podTarget(https, "pods", 1), nil, false,
			[]*discoveryv1.EndpointSlice{withPorts(gwSlice(endpointOf(pod, "10.1.0.7", "a", false)), discoveryv1.EndpointPort{Name: ptr.To("other"), Port: ptr.To[int32](9)}), gwSlice(endpointOf(other, "10.1.0.9", "a", false))}, Takes{},
			Stand{Skip: "does not serve port https"}, true},
		{"Pod target: a source-preserving set, and its node has no instance to list its private IP", podTarget(https, "pods", 1), nil, false, []*discoveryv1.EndpointSlice{gwSlice(endpointOf(pod, "10.1.0.7", "a", false))}, Takes{Instance: true},
			Stand{Skip: "its node a has no instance OCID"}, true},
		{"Pod target: not listed yet", podTarget(https, "pods", 1), nil, false, []*discoveryv1.EndpointSlice{gwSlice(endpointOf(other, "10.1.0.9", "a", false))}, Takes{}, Stand{}, false},
		{"a held target says nothing of its pods", podTarget(intstr.FromString("gone"), "pods", 1), nil, false, []*discoveryv1.EndpointSlice{gwSlice(endpointOf(pod, "10.1.0.7", "a", false))}, Takes{}, Stand{}, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			svc := mkService("ns", "gw", corev1.ServiceTypeNodePort, corev1.ServicePort{Name: "https", Port: 443, NodePort: 30443, Protocol: corev1.ProtocolTCP})
			if tt.local {
				svc.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyLocal
			}
			gated := GatedPods{}
			for _, p := range []*corev1.Pod{pod, other, unlisted} {
				gated[types.NamespacedName{Namespace: p.Namespace, Name: p.Name}] = p
			}
			spec := &v1beta1.LBRegistrarSpec{NodeSelector: tt.selector, Services: []v1beta1.Target{tt.target}}
			c := Cluster{Nodes: nodes, NodesByName: byName, Services: map[types.NamespacedName]*corev1.Service{gwKey: svc},
				EndpointSlices: map[types.NamespacedName][]*discoveryv1.EndpointSlice{gwKey: tt.slices}, Gated: gated}
			r := Compute(spec, c, Options{BackendSets: map[string]Takes{tt.target.BackendSetName: tt.takes}})
			stands := r.BackendSets[0].Stands[pod.UID]
			if !tt.listed {
				if stands != nil {
					t.Errorf("stands %+v, want none", stands)
				}
				if _, ok := r.BackendSets[0].Stands[unlisted.UID]; ok {
					t.Errorf("a pod no slice lists stands: %+v", r.BackendSets[0].Stands)
				}
				return
			}
			if len(stands) != 1 {
				t.Fatalf("stands %+v, want one", stands)
			}
			got := stands[0]
			behindNode := tt.target.TargetType != v1beta1.TargetTypePod
			if got.Target != 0 || !slices.Equal(got.Backends, tt.want.Backends) || got.Healthy != tt.want.Healthy || got.Node != behindNode || (tt.want.Skip == "") != (got.Skip == "") || !strings.Contains(got.Skip, tt.want.Skip) {
				t.Errorf("stand %+v, want %+v", got, tt.want)
			}
		})
	}
}

// A slice's change matters when it changes an endpoint as the desired
// state reads it: a pod's endpoint turning ready as its gate opens does
// not, for the pod ready but for the gate read as ready already; its
// containers' readiness turning it ready does, as does every other change,
// and every change while a pod of the Service, in this slice or another,
// still awaits its gate.
func TestEndpointsChanged(t *testing.T) {
	waiting, opened, starting := gatedPod("waiting", true, corev1.ConditionFalse), gatedPod("opened", true, corev1.ConditionTrue), gatedPod("starting", false, "")
	gated := GatedPods{{Namespace: "ns", Name: "waiting"}: waiting, {Namespace: "ns", Name: "opened"}: opened, {Namespace: "ns", Name: "starting"}: starting}
	slice := func(eps ...discoveryv1.Endpoint) *discoveryv1.EndpointSlice {
		return &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web-1",
			Labels: map[string]string{discoveryv1.LabelServiceName: "web", discoveryv1.LabelManagedBy: endpointSliceController}},
			AddressType: discoveryv1.AddressTypeIPv4, Ports: []discoveryv1.EndpointPort{{Name: ptr.To("http"), Port: ptr.To[int32](8080)}}, Endpoints: eps}
	}
	ready := func(ep discoveryv1.Endpoint) discoveryv1.Endpoint {
		ep.Conditions = discoveryv1.EndpointConditions{Ready: ptr.To(true), Serving: ptr.To(true), Terminating: ptr.To(false)}
		return ep
	}
	other := ready(endpointOf(gatedPod("plain", true, corev1.ConditionTrue), "10.1.0.9", "node-1", false))
	base := slice(endpointOf(opened, "10.1.0.1", "node-1", false), other)
	for _, tt := range []struct {
		name string
		cur  *discoveryv1.EndpointSlice
		want bool
	}{
		{"nothing", slice(endpointOf(opened, "10.1.0.1", "node-1", false), other), false},
		{"its gate opened: the endpoint turned ready", slice(ready(endpointOf(opened, "10.1.0.1", "node-1", false)), other), false},
		{"ready unset reads as ready", slice(discoveryv1.Endpoint{Addresses: []string{"10.1.0.1"}, NodeName: ptr.To("node-1"),
			TargetRef: base.Endpoints[0].TargetRef}, other), false},
		{"terminating", slice(endpointOf(opened, "10.1.0.1", "node-1", true), other), true},
		{"moved to another node", slice(endpointOf(opened, "10.1.0.1", "node-2", false), other), true},
		{"another address", slice(endpointOf(opened, "10.1.0.2", "node-1", false), other), true},
		{"an endpoint more", slice(endpointOf(opened, "10.1.0.1", "node-1", false), other, endpointOf(starting, "10.1.0.3", "node-1", false)), true},
		{"an endpoint less", slice(endpointOf(opened, "10.1.0.1", "node-1", false)), true},
	} {
		if got := EndpointsChanged(base, tt.cur, nil, gated); got != tt.want {
			t.Errorf("%s: EndpointsChanged = %t, want %t", tt.name, got, tt.want)
		}
	}
	// A pod not waiting for its gate turning ready is a change: its
	// containers became ready.
	notWaiting := slice(endpointOf(starting, "10.1.0.3", "node-1", false))
	if !EndpointsChanged(notWaiting, slice(ready(endpointOf(starting, "10.1.0.3", "node-1", false))), nil, gated) {
		t.Error("a pod that was not waiting for its gate turning ready is no change")
	}
	// A pod still awaiting its gate: whether the others are ready says
	// whether its node's health can pass.
	awaiting := endpointOf(waiting, "10.1.0.4", "node-1", false)
	opening := slice(ready(endpointOf(opened, "10.1.0.1", "node-1", false)), other)
	if !EndpointsChanged(slice(endpointOf(opened, "10.1.0.1", "node-1", false), other, awaiting), slice(ready(endpointOf(opened, "10.1.0.1", "node-1", false)), other, awaiting), nil, gated) {
		t.Error("a gate opening while another pod of the slice awaits its own is no change")
	}
	if !EndpointsChanged(base, opening, []*discoveryv1.EndpointSlice{slice(awaiting)}, gated) {
		t.Error("a gate opening while a pod of another slice awaits its own is no change")
	}
	for name, change := range map[string]func(s *discoveryv1.EndpointSlice){
		"port":         func(s *discoveryv1.EndpointSlice) { s.Ports[0].Port = ptr.To[int32](9090) },
		"port name":    func(s *discoveryv1.EndpointSlice) { s.Ports[0].Name = ptr.To("https") },
		"protocol":     func(s *discoveryv1.EndpointSlice) { s.Ports[0].Protocol = ptr.To(corev1.ProtocolUDP) },
		"Service":      func(s *discoveryv1.EndpointSlice) { s.Labels[discoveryv1.LabelServiceName] = "api" },
		"manager":      func(s *discoveryv1.EndpointSlice) { s.Labels[discoveryv1.LabelManagedBy] = "someone" },
		"address type": func(s *discoveryv1.EndpointSlice) { s.AddressType = discoveryv1.AddressTypeIPv6 },
	} {
		cur := slice(endpointOf(opened, "10.1.0.1", "node-1", false), other)
		change(cur)
		if !EndpointsChanged(base, cur, nil, gated) {
			t.Errorf("a change of the slice's %s is no change", name)
		}
	}
}

// A slice change EndpointsChanged calls none computes the same desired
// state, stands and issues included, whatever the endpoints' conditions
// and the gated pods: its predicate may keep such a change from the
// reconciles. Random endpoints of four pods, some gated in every state,
// for a Pod target, a node target that follows the endpoints, and a node
// target of a Service with externalTrafficPolicy Local.
func TestEndpointsChangedNoneComputesTheSame(t *testing.T) {
	rng := rand.New(rand.NewPCG(55, 62))
	port := corev1.ServicePort{Name: "https", Port: 443, NodePort: 30443, TargetPort: intstr.FromString("https")}
	cluster, local := mkService("ns", "gw", corev1.ServiceTypeNodePort, port), mkService("ns", "gw", corev1.ServiceTypeNodePort, port)
	local.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyLocal
	nodes := []*corev1.Node{mkNode("a", "10.0.0.1"), mkNode("b", "10.0.0.2")}
	https := intstr.FromString("https")
	spec := v1beta1.LBRegistrarSpec{Services: []v1beta1.Target{podTarget(https, "pods", 1),
		{Namespace: "ns", Name: "gw", Port: &https, BackendSetName: "nodes", Weight: 1, FilterByEndpoints: true}}}
	maybe := func() *bool {
		switch rng.IntN(3) {
		case 0:
			return nil
		case 1:
			return ptr.To(true)
		}
		return ptr.To(false)
	}
	condition := func(typ corev1.PodConditionType) []corev1.PodCondition {
		switch rng.IntN(3) {
		case 0:
			return nil
		case 1:
			return []corev1.PodCondition{{Type: typ, Status: corev1.ConditionTrue}}
		}
		return []corev1.PodCondition{{Type: typ, Status: corev1.ConditionFalse, Reason: kubeletGatesNotReady}}
	}
	endpoint := func(i int) discoveryv1.Endpoint {
		ep := endpointOf(gatedPod(fmt.Sprint("pod-", i), true, ""), fmt.Sprint("10.1.0.", i), []string{"a", "b"}[i%2], false)
		ep.Conditions = discoveryv1.EndpointConditions{Ready: maybe(), Serving: maybe(), Terminating: maybe()}
		return ep
	}
	compute := func(svc *corev1.Service, s *discoveryv1.EndpointSlice, gated GatedPods) Result {
		c := Cluster{Nodes: nodes, NodesByName: byName(nodes...), Gated: gated,
			Services:       map[types.NamespacedName]*corev1.Service{gwKey: svc},
			EndpointSlices: map[types.NamespacedName][]*discoveryv1.EndpointSlice{gwKey: {s}}}
		return Compute(&spec, c, Options{})
	}
	unchanged, told := 0, 0 // told: of the unchanged, those whose endpoints the slice changed
	for range 20000 {
		gated := GatedPods{}
		for i := range 4 {
			if rng.IntN(4) == 0 {
				continue // no gate: not in the cache
			}
			p := gatedPod(fmt.Sprint("pod-", i), rng.IntN(2) == 0, "")
			p.Status.Conditions = append(p.Status.Conditions, condition(v1beta1.ReadinessGate)...)
			p.Status.Conditions = append(p.Status.Conditions, condition(corev1.PodReady)...)
			if rng.IntN(8) == 0 {
				p.DeletionTimestamp = &metav1.Time{}
			}
			gated[types.NamespacedName{Namespace: "ns", Name: p.Name}] = p
		}
		var eps []discoveryv1.Endpoint
		for i := range 4 {
			if rng.IntN(4) > 0 {
				eps = append(eps, endpoint(i))
			}
		}
		old := gwSlice(eps...)
		cur := gwSlice(slices.Clone(eps)...)
		if len(cur.Endpoints) > 0 {
			k := rng.IntN(len(cur.Endpoints))
			cur.Endpoints[k].Conditions = discoveryv1.EndpointConditions{Ready: maybe(), Serving: maybe(), Terminating: maybe()}
		}
		if EndpointsChanged(old, cur, nil, gated) {
			continue
		}
		unchanged++
		if !reflect.DeepEqual(old.Endpoints, cur.Endpoints) {
			told++
		}
		for _, svc := range []*corev1.Service{cluster, local} {
			before, after := compute(svc, old, gated), compute(svc, cur, gated)
			if !reflect.DeepEqual(before, after) {
				t.Fatalf("no change, says EndpointsChanged, yet the desired state changed (externalTrafficPolicy %q)\nold %+v\ncur %+v\ngated %+v\nbefore %+v\nafter %+v",
					svc.Spec.ExternalTrafficPolicy, old.Endpoints, cur.Endpoints, gated, before, after)
			}
		}
	}
	if unchanged < 1000 || told < 200 {
		t.Errorf("only %d of the changes were none, %d of them with a changed endpoint; the test shows little", unchanged, told)
	}
	t.Logf("%d changes none, %d of them with a changed endpoint", unchanged, told)
}
