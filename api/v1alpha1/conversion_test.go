package v1alpha1

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/peppy-ratio/lbregistrar/api/v1beta1"
)

// seedSingleService is the original single-service example as users have it.
func seedSingleService() *LBRegistrar {
	return &LBRegistrar{
		TypeMeta:   metav1.TypeMeta{APIVersion: GroupVersion.String(), Kind: "LBRegistrar"},
		ObjectMeta: metav1.ObjectMeta{Name: "lbregistrar-ingress-https", CreationTimestamp: metav1.Unix(1_700_000_000, 0)},
		Spec: LBRegistrarSpec{
			LoadBalancerID: lbID,
			BackendSetName: "ingress",
			Weight:         1,
			Service:        &ServiceSpec{Name: "istio-ingressgateway", Namespace: "istio-system", Port: intstr.FromString("https")},
		},
	}
}

func TestToHubSingleService(t *testing.T) {
	var hub v1beta1.LBRegistrar
	ToHub(seedSingleService(), &hub)
	https := intstr.FromString("https")
	want := []v1beta1.Target{{Name: "istio-ingressgateway", Namespace: "istio-system", Port: &https, BackendSetName: "ingress", Weight: 1}}
	if diff := cmp.Diff(want, hub.Spec.Services); diff != "" {
		t.Errorf("services (-want +got):\n%s", diff)
	}
	if hub.APIVersion != v1beta1.GroupVersion.String() {
		t.Errorf("apiVersion = %q", hub.APIVersion)
	}
	if _, ok := hub.Annotations[AlphaSpecAnnotation]; !ok {
		t.Errorf("the single-service shape must be kept in %s to read back exactly", AlphaSpecAnnotation)
	}
	var back LBRegistrar
	FromHub(&hub, &back)
	if diff := cmp.Diff(seedSingleService(), &back, cmpOptions...); diff != "" {
		t.Errorf("read back as v1alpha1 (-want +got):\n%s", diff)
	}
}

func TestEditThroughHubWinsOverKeptAlphaSpec(t *testing.T) {
	var hub v1beta1.LBRegistrar
	ToHub(seedSingleService(), &hub)
	hub.Spec.Services[0].Weight = 5 // edited through v1beta1; the kept annotation is now stale

	var spoke LBRegistrar
	FromHub(&hub, &spoke)
	if spoke.Spec.Service != nil || len(spoke.Spec.Services) != 1 || spoke.Spec.Services[0].Weight != 5 {
		t.Fatalf("want the edited services list, got %+v", spoke.Spec)
	}
	if _, ok := spoke.Annotations[AlphaSpecAnnotation]; ok {
		t.Errorf("the stale %s must not reach v1alpha1", AlphaSpecAnnotation)
	}
}

func TestEditThroughSpokeKeepsHubOnlyFields(t *testing.T) {
	port := intstr.FromInt32(443)
	hub := &v1beta1.LBRegistrar{Spec: v1beta1.LBRegistrarSpec{
		LoadBalancerID: lbID,
		NodeSelector:   &metav1.LabelSelector{MatchLabels: map[string]string{"ingress": "true"}},
		Suspend:        true,
		DeletionPolicy: v1beta1.DeletionPolicyOrphan,
		APIKey:         &v1beta1.APIKey{Passphrase: &v1beta1.SecretKeySource{Namespace: "ns", SecretKeyRef: v1beta1.SecretKeyRef{Name: "n", Key: "k"}}},
		Services: []v1beta1.Target{
			{Name: "gw", Namespace: "ns", Port: &port, BackendSetName: "a", Weight: 1},
			{NodePort: 30080, BackendSetName: "fixed", Weight: 1},
		},
	}}
	var spoke LBRegistrar
	FromHub(hub, &spoke)
	spoke.Spec.Services[0].Weight = 9 // a v1alpha1 client edits what it can see

	var back v1beta1.LBRegistrar
	ToHub(&spoke, &back)
	want := hub.Spec.DeepCopy()
	want.Services[0].Weight = 9
	if diff := cmp.Diff(want, &back.Spec, cmpOptions...); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

// A target's type, which v1alpha1 cannot show, survives a v1alpha1 client's
// edit of that target, also with a Service port's node port and endpoints
// in one backend set during a migration; a target the client replaced by
// another Service port is that client's, of the default type.
func TestEditThroughSpokeKeepsTargetTypes(t *testing.T) {
	https := intstr.FromString("https")
	hub := &v1beta1.LBRegistrar{Spec: v1beta1.LBRegistrarSpec{
		LoadBalancerID: lbID,
		APIKey:         &v1beta1.APIKey{},
		Services: []v1beta1.Target{
			{Name: "gw", Namespace: "ns", Port: &https, BackendSetName: "a", Weight: 90},
			{Name: "gw", Namespace: "ns", Port: &https, BackendSetName: "a", Weight: 10, TargetType: v1beta1.TargetTypePod},
			{NodePort: 30080, BackendSetName: "fixed", Weight: 1},
			{Name: "api", Namespace: "ns", Port: &https, BackendSetName: "b", Weight: 1, TargetType: v1beta1.TargetTypePod},
		},
	}}
	var spoke LBRegistrar
	FromHub(hub, &spoke)
	if len(spoke.Spec.Services) != 3 {
		t.Fatalf("v1alpha1 shows %d Service targets, want 3: %+v", len(spoke.Spec.Services), spoke.Spec.Services)
	}
	// The weight moves to the pods; the last target becomes another port.
	spoke.Spec.Services[0].Weight, spoke.Spec.Services[1].Weight = 10, 90
	spoke.Spec.Services[2].Port = intstr.FromString("grpc")

	var back v1beta1.LBRegistrar
	ToHub(&spoke, &back)
	grpc := intstr.FromString("grpc")
	want := hub.Spec.DeepCopy()
	want.Services[0].Weight, want.Services[1].Weight = 10, 90
	want.Services[3].Port, want.Services[3].TargetType = &grpc, ""
	want.Services = append(want.Services[:2], want.Services[3], want.Services[2]) // hidden fixed ports follow
	if diff := cmp.Diff(want, &back.Spec, cmpOptions...); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

// v1alpha1 requires apiKey: a resource that signs in without one shows its
// region there, keeps its identity through an edit by a v1alpha1 client
// (with the region that client wrote), and signs in with a key once that
// client writes one. An identity taken back from the annotation is marked
// unchecked: conversion cannot tell it from one planted there before
// lbregistrar was installed. v1alpha1 does not show the mark.
func TestEditThroughSpokeKeepsKeylessIdentity(t *testing.T) {
	port := intstr.FromInt32(443)
	identities := map[string]func(*v1beta1.LBRegistrarSpec, string){
		"workload identity of a service account": func(s *v1beta1.LBRegistrarSpec, region string) {
			s.WorkloadIdentity = &v1beta1.WorkloadIdentity{Region: region, ServiceAccount: &v1beta1.ServiceAccountReference{Namespace: "team-a", Name: "lb-writer"}}
		},
		"workload identity of the controller": func(s *v1beta1.LBRegistrarSpec, region string) {
			s.WorkloadIdentity = &v1beta1.WorkloadIdentity{Region: region}
		},
		"instance principal": func(s *v1beta1.LBRegistrarSpec, region string) {
			s.InstancePrincipal = &v1beta1.InstancePrincipal{Region: region}
		},
	}
	for name, identity := range identities {
		t.Run(name, func(t *testing.T) {
			hub := &v1beta1.LBRegistrar{Spec: v1beta1.LBRegistrarSpec{
				LoadBalancerID: lbID,
				Services:       []v1beta1.Target{{Name: "gw", Namespace: "ns", Port: &port, BackendSetName: "a", Weight: 1}},
			}}
			identity(&hub.Spec, "ap-tokyo-1")
			var spoke LBRegistrar
			FromHub(hub, &spoke)
			if want := (APIKeySpec{Region: "ap-tokyo-1"}); spoke.Spec.APIKey != want {
				t.Errorf("v1alpha1 apiKey = %+v, want only the region: %+v", spoke.Spec.APIKey, want)
			}

			spoke.Spec.Services[0].Weight = 9
			spoke.Spec.APIKey.Region = "ap-osaka-1"
			var back v1beta1.LBRegistrar
			ToHub(&spoke, &back)
			want := hub.Spec.DeepCopy()
			want.Services[0].Weight = 9
			identity(want, "ap-osaka-1")
			if diff := cmp.Diff(want, &back.Spec, cmpOptions...); diff != "" {
				t.Errorf("after an edit through v1alpha1 (-want +got):\n%s", diff)
			}
			if got := back.Annotations[UncheckedIdentityAnnotation]; got != want.Identity() {
				t.Errorf("%s = %q, want %q", UncheckedIdentityAnnotation, got, want.Identity())
			}

			FromHub(&back, &spoke)
			if _, ok := spoke.Annotations[UncheckedIdentityAnnotation]; ok {
				t.Errorf("v1alpha1 shows %s", UncheckedIdentityAnnotation)
			}
			spoke.Spec.APIKey = APIKeySpec{User: "u", Fingerprint: "f", Tenancy: "t", Region: "ap-osaka-1",
				PrivateKey: SecretKeySpec{Namespace: "ns", SecretKeyRef: SecretKeyRef{Name: "n", Key: "k"}}}
			ToHub(&spoke, &back)
			if back.Spec.APIKey == nil || back.Spec.APIKey.User != "u" || back.Spec.WorkloadIdentity != nil || back.Spec.InstancePrincipal != nil {
				t.Errorf("a key written through v1alpha1 must be what the resource signs in with, got %+v", back.Spec)
			}
			if _, ok := back.Annotations[UncheckedIdentityAnnotation]; ok {
				t.Errorf("an API key is marked %s", UncheckedIdentityAnnotation)
			}
		})
	}
}

// Fixed ports that v1alpha1 cannot all show survive an edit through
// v1alpha1, once each, and what the client wrote wins.
func TestEditFixedPortsThroughSpoke(t *testing.T) {
	https := intstr.FromString("https")
	gw := v1beta1.Target{Name: "gw", Namespace: "ns", Port: &https, BackendSetName: "gw", Weight: 1}
	fixed := func(port int32, backendSet string, weight int32) v1beta1.Target {
		return v1beta1.Target{NodePort: port, BackendSetName: backendSet, Weight: weight}
	}
	tests := []struct {
		name string
		in   []v1beta1.Target
		edit func(*LBRegistrarSpec)
		want []v1beta1.Target
	}{{
		name: "the weight of the fixed port shown as nodePort",
		in:   []v1beta1.Target{fixed(30080, "a", 1), fixed(30443, "b", 1)},
		edit: func(s *LBRegistrarSpec) { s.Weight = 5 },
		want: []v1beta1.Target{fixed(30080, "a", 5), fixed(30443, "b", 1)},
	}, {
		name: "nodePort changed to a hidden fixed port",
		in:   []v1beta1.Target{fixed(30080, "a", 1), fixed(30443, "b", 1)},
		edit: func(s *LBRegistrarSpec) { s.NodePort, s.BackendSetName, s.Weight = 30443, "b", 7 },
		want: []v1beta1.Target{fixed(30443, "b", 7)},
	}, {
		name: "nodePort removed for a service",
		in:   []v1beta1.Target{fixed(30080, "a", 1), fixed(30443, "b", 1), fixed(30444, "b", 1)},
		edit: func(s *LBRegistrarSpec) {
			s.NodePort, s.BackendSetName = 0, ""
			s.Services = []ServiceSpec{{Name: "gw", Namespace: "ns", Port: https, BackendSetName: "gw", Weight: 1}}
		},
		want: []v1beta1.Target{gw, fixed(30443, "b", 1), fixed(30444, "b", 1)},
	}, {
		name: "a hidden fixed port added again beside services",
		in:   []v1beta1.Target{gw, fixed(30443, "b", 1)},
		edit: func(s *LBRegistrarSpec) {
			s.Services = append(s.Services, ServiceSpec{Name: "web", Namespace: "ns", Port: https, BackendSetName: "web", Weight: 1})
			s.NodePort, s.BackendSetName = 30443, "b" // ignored beside services, as ever
		},
		want: []v1beta1.Target{gw, {Name: "web", Namespace: "ns", Port: &https, BackendSetName: "web", Weight: 1}, fixed(30443, "b", 1)},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			hub := &v1beta1.LBRegistrar{Spec: v1beta1.LBRegistrarSpec{LoadBalancerID: lbID, Services: tt.in}}
			var spoke LBRegistrar
			FromHub(stored(t, hub), &spoke)
			if len(NormalizeSpec(&spoke.Spec).Services) == 0 {
				t.Fatalf("the v1alpha1 view has no target: %+v", spoke.Spec)
			}
			tt.edit(&spoke.Spec)
			var back v1beta1.LBRegistrar
			ToHub(stored(t, &spoke), &back)
			if diff := cmp.Diff(tt.want, back.Spec.Services, cmpOptions...); diff != "" {
				t.Errorf("services (-want +got):\n%s", diff)
			}
		})
	}
}

func TestUnreadableAnnotationsAreIgnored(t *testing.T) {
	spoke := seedSingleService()
	spoke.Annotations = map[string]string{HubDataAnnotation: "{not json"}
	var hub v1beta1.LBRegistrar
	ToHub(spoke, &hub)
	if len(hub.Spec.Services) != 1 {
		t.Errorf("services = %+v", hub.Spec.Services)
	}

	hub.Annotations[AlphaSpecAnnotation] = "[]"
	var back LBRegistrar
	FromHub(&hub, &back)
	if back.Spec.LoadBalancerID != lbID {
		t.Errorf("spec lost: %+v", back.Spec)
	}
}

func TestPhaseAndConditions(t *testing.T) {
	created := metav1.Unix(1_700_000_000, 0)
	tests := []struct {
		phase  Phase
		status metav1.ConditionStatus
		reason string
	}{
		{PhaseReady, metav1.ConditionTrue, v1beta1.ReasonRegistered},
		{PhaseRegistering, metav1.ConditionFalse, v1beta1.ReasonRegistering},
		{PhasePending, metav1.ConditionFalse, v1beta1.ReasonPending},
		{"SOMETHING-ELSE", metav1.ConditionUnknown, ReasonLegacyPhase},
	}
	for _, tt := range tests {
		t.Run(string(tt.phase), func(t *testing.T) {
			status := StatusFromPhase(tt.phase, created)
			if len(status.Conditions) != 1 {
				t.Fatalf("conditions = %+v", status.Conditions)
			}
			c := status.Conditions[0]
			if c.Type != v1beta1.ConditionReady || c.Status != tt.status || c.Reason != tt.reason || !c.LastTransitionTime.Equal(&created) {
				t.Errorf("condition = %+v", c)
			}
			if got := PhaseFromConditions(status.Conditions); got != tt.phase {
				t.Errorf("phase back = %q, want %q", got, tt.phase)
			}
		})
	}
	if got := StatusFromPhase("", created); len(got.Conditions) != 0 {
		t.Errorf("no phase must give no condition, got %+v", got)
	}
	if got := PhaseFromConditions(nil); got != "" {
		t.Errorf("no condition must give no phase, got %q", got)
	}
	degradedOnly := []metav1.Condition{{Type: v1beta1.ConditionReady, Status: metav1.ConditionFalse, Reason: "NodePortMissing"}}
	if got := PhaseFromConditions(degradedOnly); got != PhasePending {
		t.Errorf("a not-ready reason other than Registering = %q, want PENDING", got)
	}
}

// A phase written through v1alpha1, as the original operator writes one on
// every pass, changes the Ready condition and nothing else: the ownership
// record, its load balancer and the other conditions stay.
func TestPhaseWriteKeepsTheRecord(t *testing.T) {
	created := metav1.Unix(1_700_000_000, 0)
	hub := &v1beta1.LBRegistrar{ObjectMeta: metav1.ObjectMeta{Name: "r", CreationTimestamp: created}}
	hub.Spec = NormalizeSpec(&seedSingleService().Spec)
	hub.Status = v1beta1.LBRegistrarStatus{
		ObservedGeneration: 3,
		LoadBalancerID:     lbID,
		BackendSets:        []v1beta1.BackendSetStatus{{Name: "ingress", Backends: []v1beta1.BackendGroup{{Port: 30443, Weight: 1, Addresses: "10.0.0.1 10.0.0.2"}}}},
		Conditions: []metav1.Condition{
			{Type: v1beta1.ConditionReady, Status: metav1.ConditionTrue, Reason: v1beta1.ReasonRegistered, LastTransitionTime: created},
			{Type: v1beta1.ConditionDegraded, Status: metav1.ConditionFalse, Reason: "AsExpected", LastTransitionTime: created},
		},
	}
	for _, phase := range []Phase{PhasePending, PhaseRegistering, "", "SOMETHING-ELSE", PhaseReady} {
		t.Run(string(phase), func(t *testing.T) {
			var spoke LBRegistrar
			FromHub(hub, &spoke)
			spoke.Status.Phase = phase
			var back v1beta1.LBRegistrar
			ToHub(&spoke, &back)
			if diff := cmp.Diff(hub.Status.BackendSets, back.Status.BackendSets); diff != "" || back.Status.LoadBalancerID != lbID || back.Status.ObservedGeneration != 3 {
				t.Errorf("record after a phase write (-want +got):\n%s\nloadBalancerId %q, observedGeneration %d", diff, back.Status.LoadBalancerID, back.Status.ObservedGeneration)
			}
			if meta.FindStatusCondition(back.Status.Conditions, v1beta1.ConditionDegraded) == nil {
				t.Errorf("Degraded lost: %+v", back.Status.Conditions)
			}
			if got := PhaseFromConditions(back.Status.Conditions); got != phase {
				t.Errorf("phase reads back as %q, want %q", got, phase)
			}
			var again LBRegistrar
			FromHub(&back, &again)
			if again.Status.Phase != phase {
				t.Errorf("phase after a round trip %q, want %q", again.Status.Phase, phase)
			}
		})
	}
}
