package desired

import (
	"maps"
	"slices"
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

// A pod that waits only for the gate is registered as though ready, by
// Pod targets and by node targets that follow the endpoints; one that is
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

	backends, _ := PodEndpoints(gwKey, https, []*discoveryv1.EndpointSlice{slice}, IPv4, nil, gated)
	if len(backends) != 1 || backends[0].IP != "10.1.0.1" {
		t.Errorf("pod backends %v, want 10.1.0.1 alone", backends)
	}
	if got := slices.Sorted(maps.Keys(ServingNodes(gwKey, https, []*discoveryv1.EndpointSlice{slice}, gated, true))); !slices.Equal(got, []string{"a"}) {
		t.Errorf("serving nodes %v, want [a]", got)
	}
	if backends, _ := PodEndpoints(gwKey, https, []*discoveryv1.EndpointSlice{slice}, IPv4, nil, nil); len(backends) != 0 {
		t.Errorf("without the gated pods, backends %v, want none", backends)
	}
}

func TestBackendsOf(t *testing.T) {
	pod := gatedPod("web-1", true, "")
	svc := mkService("ns", "gw", corev1.ServiceTypeNodePort,
		corev1.ServicePort{Name: "https", Port: 443, NodePort: 30443}, corev1.ServicePort{Name: "dns", Port: 53, NodePort: 30053, Protocol: corev1.ProtocolUDP})
	v4 := gwSlice(endpointOf(pod, "10.1.0.7", "a", false), endpointOf(gatedPod("other", true, ""), "10.1.0.8", "a", false))
	v6 := withPorts(sliceOf("ns", "gw", discoveryv1.AddressTypeIPv6, endpointOf(pod, "FD00::7", "a", false)), gwSlice().Ports...)
	node := mkNode("a", "10.0.0.1", withAddress("fd00::1"))
	endpointSlices := []*discoveryv1.EndpointSlice{v4, v6}
	https := intstr.FromString("https")
	for _, tt := range []struct {
		name   string
		target v1beta1.Target
		want   []string
	}{
		{"Pod target: its endpoints, each family", podTarget(https, "bs", 1), []string{"10.1.0.7:8443", "[fd00::7]:8443"}},
		{"node target: its node's addresses, the node port", svcTarget(https, "bs", 1), []string{"10.0.0.1:30443", "[fd00::1]:30443"}},
		{"a port its slices do not serve", podTarget(intstr.FromString("dns"), "bs", 1), nil},
	} {
		if got, listed := BackendsOf(pod, &tt.target, svc, endpointSlices, node); !slices.Equal(got, tt.want) || !listed {
			t.Errorf("%s: %v (listed %t), want %v, listed", tt.name, got, listed, tt.want)
		}
	}
	// Not in the Service's slices yet: none, and not listed.
	if got, listed := BackendsOf(gatedPod("new", true, ""), ptr.To(podTarget(https, "bs", 1)), svc, endpointSlices, node); got != nil || listed {
		t.Errorf("a pod not listed yet: %v, listed %t", got, listed)
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

// A node target's health check needs a ready endpoint other than the pod
// waiting for its gate: anywhere, or, with externalTrafficPolicy Local, on
// its node.
func TestHealthWaitsFor(t *testing.T) {
	waiting := gatedPod("new", true, corev1.ConditionFalse)
	waiting.Spec.NodeName = "a"
	ready := func(node string) discoveryv1.Endpoint {
		ep := endpointOf(gatedPod("old-on-"+node, true, corev1.ConditionTrue), "10.1.0.9", node, false)
		ep.Conditions.Ready = ptr.To(true)
		return ep
	}
	cluster := mkService("ns", "gw", corev1.ServiceTypeNodePort)
	local := mkService("ns", "gw", corev1.ServiceTypeNodePort)
	local.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyLocal
	itself := gwSlice(endpointOf(waiting, "10.1.0.1", "a", false))
	for _, tt := range []struct {
		name  string
		svc   *corev1.Service
		slice *discoveryv1.EndpointSlice
		want  bool
	}{
		{"the only endpoint", cluster, itself, true},
		{"another ready elsewhere", cluster, gwSlice(endpointOf(waiting, "10.1.0.1", "a", false), ready("b")), false},
		{"Local: another ready elsewhere only", local, gwSlice(endpointOf(waiting, "10.1.0.1", "a", false), ready("b")), true},
		{"Local: another ready on its node", local, gwSlice(endpointOf(waiting, "10.1.0.1", "a", false), ready("a")), false},
	} {
		if got := HealthWaitsFor(waiting, tt.svc, []*discoveryv1.EndpointSlice{tt.slice}); got != tt.want {
			t.Errorf("%s: HealthWaitsFor = %t, want %t", tt.name, got, tt.want)
		}
	}
}
