package webhook

import (
	"context"
	"encoding/json"
	"slices"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/peppy-ratio/lbregistrar/api/v1beta1"
	"github.com/peppy-ratio/lbregistrar/index"
)

// A pod gets the gate when a Service selecting it is registered for its
// pods: by a Pod target, or a node target following its endpoints
// (filterByEndpoints, externalTrafficPolicy Local); not for a node target
// registering every node, nor when no registered Service selects it.
func TestPodGate(t *testing.T) {
	https := intstr.FromString("https")
	service := func(name string, local bool) *corev1.Service {
		s := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: name}, Spec: corev1.ServiceSpec{Selector: map[string]string{"app": name}}}
		if local {
			s.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyLocal
		}
		return s
	}
	target := func(svc string, mutate func(*v1beta1.Target)) v1beta1.Target {
		t := v1beta1.Target{Namespace: "shop", Name: svc, Port: &https, BackendSetName: svc, Weight: 1}
		mutate(&t)
		return t
	}
	registrar := &v1beta1.LBRegistrar{ObjectMeta: metav1.ObjectMeta{Name: "shop"}, Spec: v1beta1.LBRegistrarSpec{Services: []v1beta1.Target{
		target("pods", func(t *v1beta1.Target) { t.TargetType = v1beta1.TargetTypePod }),
		target("filtered", func(t *v1beta1.Target) { t.FilterByEndpoints = true }),
		target("local", func(*v1beta1.Target) {}),
		target("every-node", func(*v1beta1.Target) {}),
	}}}
	scheme := runtime.NewScheme()
	_ = corev1.AddToScheme(scheme)
	_ = v1beta1.AddToScheme(scheme)
	reader := fake.NewClientBuilder().WithScheme(scheme).WithIndex(&v1beta1.LBRegistrar{}, index.ServiceField, index.ServiceFieldKeys).WithObjects(registrar,
		service("pods", false), service("filtered", false), service("local", true), service("every-node", false), service("unregistered", false)).Build()
	gate := NewPodGate(reader)

	for app, want := range map[string]bool{"pods": true, "filtered": true, "local": true, "every-node": false, "unregistered": false, "none": false} {
		pod := corev1.Pod{ObjectMeta: metav1.ObjectMeta{GenerateName: app + "-", Labels: map[string]string{"app": app}}}
		raw, _ := json.Marshal(pod)
		resp := gate.Handle(context.Background(), admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
			Operation: admissionv1.Create, Namespace: "shop", Object: runtime.RawExtension{Raw: raw}}})
		if !resp.Allowed {
			t.Errorf("%s: refused: %v", app, resp.Result)
			continue
		}
		if got := len(resp.Patches) > 0; got != want {
			t.Errorf("%s: gated %t, want %t (patches %v)", app, got, want, resp.Patches)
		}
		if want {
			paths := map[string]bool{}
			for _, p := range resp.Patches {
				paths[p.Path] = true
			}
			if !paths["/spec/readinessGates"] || !paths["/metadata/labels/nodes.peppy-ratio.dev~1readiness-gate"] {
				t.Errorf("%s: patches %v, want the gate and its label", app, resp.Patches)
			}
		}
	}
}

// The webhook asks decide.Gates, as the gates controller does: a resource
// being deleted gates nothing, a suspended one still does (its gate stays
// blocked until it resumes). A pod whose template lists the gate already is
// labelled, so the controller decides it. The patch adds the gate and the
// label and nothing else: a field the webhook's Go types do not know stays.
func TestPodGateAsksTheOneAnswer(t *testing.T) {
	https := intstr.FromString("https")
	registrar := func(name, svc string, mutate func(*v1beta1.LBRegistrar)) *v1beta1.LBRegistrar {
		r := &v1beta1.LBRegistrar{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: v1beta1.LBRegistrarSpec{Services: []v1beta1.Target{
			{Namespace: "shop", Name: svc, Port: &https, BackendSetName: svc, Weight: 1, TargetType: v1beta1.TargetTypePod}}}}
		mutate(r)
		return r
	}
	service := func(name string) *corev1.Service {
		return &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: name}, Spec: corev1.ServiceSpec{Selector: map[string]string{"app": name}}}
	}
	now := metav1.Now()
	scheme := runtime.NewScheme()
	_ = corev1.AddToScheme(scheme)
	_ = v1beta1.AddToScheme(scheme)
	// The review's cost is a lookup per Service that selects the pod,
	// never a scan of every LBRegistrar.
	indexedOnly := interceptor.Funcs{List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
		if _, ok := list.(*v1beta1.LBRegistrarList); ok && (&client.ListOptions{}).ApplyOptions(opts).FieldSelector == nil {
			t.Error("the review listed every LBRegistrar")
		}
		return c.List(ctx, list, opts...)
	}}
	reader := fake.NewClientBuilder().WithScheme(scheme).WithIndex(&v1beta1.LBRegistrar{}, index.ServiceField, index.ServiceFieldKeys).WithInterceptorFuncs(indexedOnly).WithObjects(
		registrar("suspended", "paused", func(r *v1beta1.LBRegistrar) { r.Spec.Suspend = true }),
		registrar("deleting", "going", func(r *v1beta1.LBRegistrar) { r.DeletionTimestamp, r.Finalizers = &now, []string{"x"} }),
		service("paused"), service("going"), service("plain")).Build()
	gate := NewPodGate(reader)
	handle := func(raw string) admission.Response {
		t.Helper()
		resp := gate.Handle(context.Background(), admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
			Operation: admissionv1.Create, Namespace: "shop", Object: runtime.RawExtension{Raw: []byte(raw)}}})
		if !resp.Allowed {
			t.Fatalf("refused: %v", resp.Result)
		}
		return resp
	}
	paths := func(resp admission.Response) []string {
		var out []string
		for _, p := range resp.Patches {
			out = append(out, p.Operation+" "+p.Path)
		}
		return out
	}
	for _, tt := range []struct {
		name, pod string
		want      []string
	}{
		{"a suspended resource gates", `{"metadata":{"labels":{"app":"paused"}},"spec":{"containers":[]}}`,
			[]string{"add /metadata/labels/nodes.peppy-ratio.dev~1readiness-gate", "add /spec/readinessGates"}},
		{"a resource being deleted does not", `{"metadata":{"labels":{"app":"going"}},"spec":{}}`, nil},
		{"a template that lists the gate: labelled", `{"metadata":{"labels":{"app":"plain"}},"spec":{"readinessGates":[{"conditionType":"` + v1beta1.ReadinessGate + `"}]}}`,
			[]string{"add /metadata/labels/nodes.peppy-ratio.dev~1readiness-gate"}},
		{"no labels at all, the gate listed", `{"metadata":{},"spec":{"readinessGates":[{"conditionType":"` + v1beta1.ReadinessGate + `"}]}}`,
			[]string{"add /metadata/labels"}},
		{"other gates listed: appended", `{"metadata":{"labels":{"app":"paused"}},"spec":{"readinessGates":[{"conditionType":"other"}],"aFieldFromTheFuture":{"x":1}}}`,
			[]string{"add /metadata/labels/nodes.peppy-ratio.dev~1readiness-gate", "add /spec/readinessGates/-"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := paths(handle(tt.pod)); !slices.Equal(got, tt.want) {
				t.Errorf("patches %v, want %v", got, tt.want)
			}
		})
	}
}

// A pod listing lbregistrar's gate, or carrying its label, in a namespace
// that did not opt in loses both, by JSON patch ops from the request, the
// other gates and labels left as they are.
func TestPodUngateTakesOffOnlyOurs(t *testing.T) {
	handle := func(raw string) admission.Response {
		t.Helper()
		return NewPodUngate().Handle(context.Background(), admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
			Operation: admissionv1.Create, Namespace: "elsewhere", Object: runtime.RawExtension{Raw: []byte(raw)}}})
	}
	gate := `{"conditionType":"` + v1beta1.ReadinessGate + `"}`
	for _, tt := range []struct {
		name, pod string
		paths     []string
	}{
		{"the gate among others", `{"metadata":{"labels":{"app":"web"}},"spec":{"readinessGates":[{"conditionType":"example.com/x"},` + gate + `,{"conditionType":"example.com/y"},` + gate + `]}}`,
			[]string{"/spec/readinessGates/3", "/spec/readinessGates/1"}},
		{"the label and the gate", `{"metadata":{"labels":{"` + v1beta1.ReadinessGateLabel + `":""}},"spec":{"readinessGates":[` + gate + `]}}`,
			[]string{"/metadata/labels/nodes.peppy-ratio.dev~1readiness-gate", "/spec/readinessGates/0"}},
		{"neither", `{"metadata":{"labels":{"app":"web"}},"spec":{}}`, nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			resp := handle(tt.pod)
			var paths []string
			for _, op := range resp.Patches {
				if op.Operation != "remove" {
					t.Errorf("op %+v, want removes only", op)
				}
				paths = append(paths, op.Path)
			}
			if !resp.Allowed || !slices.Equal(paths, tt.paths) {
				t.Errorf("allowed %v, removes %v; want %v", resp.Allowed, paths, tt.paths)
			}
			if len(tt.paths) > 0 && len(resp.Warnings) == 0 {
				t.Error("no warning says why the gate was taken off")
			}
		})
	}
}
