package v1alpha1

import (
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/randfill"

	"github.com/peppy-ratio/lbregistrar/api/v1beta1"
)

// The fill functions draw most values from small pools, so that the cases the
// rules care about (services beside service, port beside nodePort, a weight
// or backend set that matches the top-level one) come up often, and mix in
// arbitrary strings so that nothing depends on the pools.

func pick[T any](c randfill.Continue, pool ...T) T { return pool[c.Intn(len(pool))] }

func someString(c randfill.Continue, pool ...string) string {
	if c.Intn(8) == 0 {
		return c.String(12)
	}
	return pick(c, pool...)
}

func fillIntOrString(p *intstr.IntOrString, c randfill.Continue) {
	if c.Bool() {
		*p = intstr.FromInt32(pick[int32](c, 0, 80, 443, 30080))
		return
	}
	*p = intstr.FromString(someString(c, "", "http", "https", "http2"))
}

func fillObjectMeta(m *metav1.ObjectMeta, c randfill.Continue) {
	*m = metav1.ObjectMeta{
		Name:       someString(c, "a", "b", "ingress"),
		UID:        "0b5e1a35-7c59-4c39-8e0e-3c2a0f3a1b2c",
		Generation: c.Int63n(4),
	}
	if c.Bool() {
		m.CreationTimestamp = metav1.Unix(1_700_000_000+c.Int63n(1_000_000), 0)
	}
	m.Labels = fillStringMap(c)
	m.Annotations = fillStringMap(c)
}

// fillStringMap returns labels or annotations; never the keys conversion
// reserves for itself, which a round trip replaces by design.
func fillStringMap(c randfill.Continue) map[string]string {
	n := c.Intn(3)
	if n == 0 {
		return nil
	}
	m := make(map[string]string, n)
	for range n {
		m[someString(c, "team", "app.kubernetes.io/name", "nodes.peppy-ratio.dev/note")] = someString(c, "", "x", "{}")
	}
	return m
}

func fillAlphaService(s *ServiceSpec, c randfill.Continue) {
	*s = ServiceSpec{
		Name:              someString(c, "", "istio-ingressgateway", "web"),
		Namespace:         someString(c, "", "istio-system", "default"),
		FilterByEndpoints: c.Bool(),
		Weight:            pick(c, -1, 0, 1, 2, 100),
		BackendSetName:    someString(c, "", "ingress", "ingress-http"),
	}
	fillIntOrString(&s.Port, c)
}

func fillAlphaSpec(s *LBRegistrarSpec, c randfill.Continue) {
	*s = LBRegistrarSpec{
		LoadBalancerID: someString(c, "ocid1.loadbalancer.oc1.ap-tokyo-1.aaa", "ocid1.networkloadbalancer.oc1.ap-tokyo-1.aaa"),
		NodePort:       pick(c, 0, 0, 30080, 30443),
		Port:           pick(c, 0, 0, 30080, 30443),
		Weight:         pick(c, -1, 0, 1, 1, 3, 100),
		BackendSetName: someString(c, "", "ingress", "ingress-http"),
	}
	c.Fill(&s.APIKey)
	if c.Bool() {
		s.Service = new(ServiceSpec)
		fillAlphaService(s.Service, c)
	}
	if n := c.Intn(4) - 1; n >= 0 {
		s.Services = make([]ServiceSpec, n)
		for i := range s.Services {
			fillAlphaService(&s.Services[i], c)
		}
	}
}

func fillPhase(p *Phase, c randfill.Continue) {
	*p = Phase(someString(c, "", "PENDING", "REGISTERING", "READY"))
}

func fillTarget(t *v1beta1.Target, c randfill.Continue) {
	*t = v1beta1.Target{
		FilterByEndpoints: c.Intn(3) == 0,
		BackendSetName:    someString(c, "", "ingress", "ingress-http"),
		Weight:            pick[int32](c, 0, 1, 1, 5, 100),
		TargetType:        pick[v1beta1.TargetType](c, "", "", v1beta1.TargetTypeNodePort, v1beta1.TargetTypePod),
	}
	if c.Intn(3) == 0 {
		t.NodePort = pick[int32](c, 30080, 30443)
	} else {
		t.Name = someString(c, "istio-ingressgateway", "web")
		t.Namespace = someString(c, "istio-system", "default")
	}
	if t.NodePort == 0 || c.Intn(4) == 0 {
		t.Port = new(intstr.IntOrString)
		fillIntOrString(t.Port, c)
	}
}

func fillHubSpec(s *v1beta1.LBRegistrarSpec, c randfill.Continue) {
	*s = v1beta1.LBRegistrarSpec{
		LoadBalancerID: someString(c, "ocid1.loadbalancer.oc1.ap-tokyo-1.aaa", "ocid1.networkloadbalancer.oc1.ap-tokyo-1.aaa"),
		Services:       make([]v1beta1.Target, c.Intn(4)),
	}
	switch c.Intn(5) {
	case 0, 1:
		s.APIKey = &v1beta1.APIKey{}
		c.Fill(s.APIKey)
	case 2:
		s.WorkloadIdentity = &v1beta1.WorkloadIdentity{Region: someString(c, "ap-tokyo-1", "nrt")}
		if c.Intn(2) == 0 {
			s.WorkloadIdentity.ServiceAccount = &v1beta1.ServiceAccountReference{Namespace: someString(c, "team-a"), Name: someString(c, "lb-writer")}
		}
	case 3:
		s.InstancePrincipal = &v1beta1.InstancePrincipal{Region: someString(c, "ap-tokyo-1", "nrt")}
	default: // none, or several: conversion is lossless for anything
		c.Fill(&s.APIKey)
		c.Fill(&s.WorkloadIdentity)
		c.Fill(&s.InstancePrincipal)
	}
	for i := range s.Services {
		fillTarget(&s.Services[i], c)
	}
	if c.Intn(4) == 0 {
		s.NodeSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"node-role.kubernetes.io/ingress": ""}}
	}
	s.Suspend = c.Intn(4) == 0
	s.DeletionPolicy = pick(c, "", v1beta1.DeletionPolicyDelete, v1beta1.DeletionPolicyOrphan)
}

func fillConditions(conds *[]metav1.Condition, c randfill.Continue) {
	*conds = nil
	for _, typ := range []string{v1beta1.ConditionReady, v1beta1.ConditionDegraded, v1beta1.ConditionConflict} {
		if c.Intn(3) == 0 {
			continue
		}
		*conds = append(*conds, metav1.Condition{
			Type:               typ,
			Status:             pick(c, metav1.ConditionTrue, metav1.ConditionFalse, metav1.ConditionUnknown),
			Reason:             pick(c, v1beta1.ReasonRegistered, v1beta1.ReasonRegistering, v1beta1.ReasonPending, ReasonLegacyPhase, "NodePortMissing"),
			Message:            someString(c, "", "READY", "waiting for work request"),
			ObservedGeneration: c.Int63n(4),
			LastTransitionTime: metav1.Unix(1_700_000_000+c.Int63n(10), 0),
		})
	}
}

func fillWorkRequest(w *v1beta1.WorkRequest, c randfill.Continue) {
	*w = v1beta1.WorkRequest{ID: someString(c, "ocid1.workrequest.oc1..a"), Status: someString(c, "", "SUCCEEDED"), Time: metav1.Unix(1_700_000_000, 0)}
}

func fillFuncs() []any {
	return []any{
		fillObjectMeta, fillAlphaSpec, fillPhase, fillHubSpec, fillConditions, fillWorkRequest,
		func(s *string, c randfill.Continue) { *s = someString(c, "", "x") },
	}
}

func newFiller(seed int64) *randfill.Filler {
	return randfill.NewWithSeed(seed).NilChance(0.3).NumElements(0, 3).Funcs(fillFuncs()...)
}

// stored returns obj as the API server would keep it: encoded to JSON and back.
func stored[T any](t testing.TB, obj *T) *T {
	t.Helper()
	raw, err := json.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	out := new(T)
	if err := json.Unmarshal(raw, out); err != nil {
		t.Fatal(err)
	}
	return out
}

// cmpOptions compare as the API server does: empty and missing are the same.
var cmpOptions = []cmp.Option{
	cmpopts.EquateEmpty(),
	cmp.Comparer(func(a, b metav1.Time) bool { return a.Equal(&b) }),
}
