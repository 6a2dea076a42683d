package v1alpha1

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/peppy-ratio/lbregistrar/api/v1beta1"
)

const lbID = "ocid1.loadbalancer.oc1.ap-tokyo-1.aaa"

func ptrPort(p intstr.IntOrString) *intstr.IntOrString { return &p }

func TestNormalizeSpec(t *testing.T) {
	https := intstr.FromString("https")
	svc := func(mods ...func(*ServiceSpec)) ServiceSpec {
		s := ServiceSpec{Name: "gw", Namespace: "istio-system", Port: https}
		for _, m := range mods {
			m(&s)
		}
		return s
	}
	target := func(backendSet string, weight int32) v1beta1.Target {
		return v1beta1.Target{Name: "gw", Namespace: "istio-system", Port: ptrPort(https), BackendSetName: backendSet, Weight: weight}
	}
	fixed := func(port int32, backendSet string, weight int32) v1beta1.Target {
		return v1beta1.Target{NodePort: port, BackendSetName: backendSet, Weight: weight}
	}
	withBackendSet := func(name string) func(*ServiceSpec) {
		return func(s *ServiceSpec) { s.BackendSetName = name }
	}
	withWeight := func(w int) func(*ServiceSpec) {
		return func(s *ServiceSpec) { s.Weight = w }
	}

	tests := []struct {
		name string
		in   LBRegistrarSpec
		want []v1beta1.Target
	}{{
		name: "services list is used and service, nodePort, port are ignored",
		in: LBRegistrarSpec{
			Services:       []ServiceSpec{svc(withBackendSet("a")), svc(withBackendSet("b"), withWeight(3))},
			Service:        &ServiceSpec{Name: "ignored", Namespace: "x", Port: intstr.FromInt32(80)},
			NodePort:       30080,
			Port:           30443,
			BackendSetName: "top",
			Weight:         1,
		},
		want: []v1beta1.Target{target("a", 1), target("b", 3)},
	}, {
		name: "services entry without backend set inherits spec.backendSetName",
		in:   LBRegistrarSpec{Services: []ServiceSpec{svc()}, BackendSetName: "top"},
		want: []v1beta1.Target{target("top", 1)},
	}, {
		name: "services entry weight 0 takes spec.weight, as the original operator did",
		in:   LBRegistrarSpec{Services: []ServiceSpec{svc(withBackendSet("a"))}, Weight: 9},
		want: []v1beta1.Target{target("a", 9)},
	}, {
		name: "empty services list falls through to service",
		in:   LBRegistrarSpec{Services: []ServiceSpec{}, Service: ptrService(svc()), BackendSetName: "top"},
		want: []v1beta1.Target{target("top", 1)},
	}, {
		name: "single service uses spec.backendSetName and spec.weight over its own, as the original operator did",
		in:   LBRegistrarSpec{Service: ptrService(svc(withBackendSet("own"), withWeight(4))), BackendSetName: "top", Weight: 2},
		want: []v1beta1.Target{target("top", 2)},
	}, {
		name: "single service without top-level values uses its own",
		in:   LBRegistrarSpec{Service: ptrService(svc(withBackendSet("own"), withWeight(4)))},
		want: []v1beta1.Target{target("own", 4)},
	}, {
		name: "single service falls back to spec.backendSetName and spec.weight",
		in:   LBRegistrarSpec{Service: ptrService(svc()), BackendSetName: "top", Weight: 2},
		want: []v1beta1.Target{target("top", 2)},
	}, {
		name: "single service with no weight anywhere gets 1",
		in:   LBRegistrarSpec{Service: ptrService(svc()), BackendSetName: "top"},
		want: []v1beta1.Target{target("top", 1)},
	}, {
		name: "service wins over nodePort and port",
		in:   LBRegistrarSpec{Service: ptrService(svc()), NodePort: 30080, Port: 30443, BackendSetName: "top"},
		want: []v1beta1.Target{target("top", 1)},
	}, {
		name: "nodePort alone is one fixed-port target",
		in:   LBRegistrarSpec{NodePort: 30080, BackendSetName: "top", Weight: 3},
		want: []v1beta1.Target{fixed(30080, "top", 3)},
	}, {
		name: "port alone is one fixed-port target",
		in:   LBRegistrarSpec{Port: 30443, BackendSetName: "top"},
		want: []v1beta1.Target{fixed(30443, "top", 1)},
	}, {
		name: "port wins when both port and nodePort are set",
		in:   LBRegistrarSpec{NodePort: 30080, Port: 30443, BackendSetName: "top"},
		want: []v1beta1.Target{fixed(30443, "top", 1)},
	}, {
		name: "no target at all gives no target, not an error",
		in:   LBRegistrarSpec{BackendSetName: "top"},
		want: nil,
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.in.LoadBalancerID = lbID
			got := NormalizeSpec(&tt.in)
			if got.LoadBalancerID != lbID {
				t.Errorf("loadBalancerId = %q, want %q", got.LoadBalancerID, lbID)
			}
			if diff := cmp.Diff(tt.want, got.Services, cmpOptions...); diff != "" {
				t.Errorf("services (-want +got):\n%s", diff)
			}
		})
	}
}

func ptrService(s ServiceSpec) *ServiceSpec { return &s }

func TestNormalizeSpecCarriesAPIKey(t *testing.T) {
	in := LBRegistrarSpec{APIKey: APIKeySpec{
		User: "u", Fingerprint: "f", Tenancy: "t", Region: "r",
		PrivateKey: SecretKeySpec{Namespace: "ns", SecretKeyRef: SecretKeyRef{Name: "n", Key: "k"}},
	}}
	want := v1beta1.APIKey{
		User: "u", Fingerprint: "f", Tenancy: "t", Region: "r",
		PrivateKey: v1beta1.SecretKeySource{Namespace: "ns", SecretKeyRef: v1beta1.SecretKeyRef{Name: "n", Key: "k"}},
	}
	if diff := cmp.Diff(want, NormalizeSpec(&in).APIKey); diff != "" {
		t.Errorf("apiKey (-want +got):\n%s", diff)
	}
}

func TestDenormalizeSpec(t *testing.T) {
	port := intstr.FromInt32(443)
	tests := []struct {
		name string
		in   []v1beta1.Target
		want LBRegistrarSpec
	}{{
		name: "a lone fixed port becomes nodePort",
		in:   []v1beta1.Target{{NodePort: 30080, BackendSetName: "a", Weight: 3}},
		want: LBRegistrarSpec{NodePort: 30080, BackendSetName: "a", Weight: 3},
	}, {
		name: "services become the services list",
		in:   []v1beta1.Target{{Name: "gw", Namespace: "ns", Port: &port, BackendSetName: "a", Weight: 2}},
		want: LBRegistrarSpec{Weight: 1, Services: []ServiceSpec{{Name: "gw", Namespace: "ns", Port: port, BackendSetName: "a", Weight: 2}}},
	}, {
		name: "fixed ports beside services are left to the annotation",
		in: []v1beta1.Target{
			{Name: "gw", Namespace: "ns", Port: &port, BackendSetName: "a", Weight: 1},
			{NodePort: 30080, BackendSetName: "b", Weight: 1},
		},
		want: LBRegistrarSpec{Weight: 1, Services: []ServiceSpec{{Name: "gw", Namespace: "ns", Port: port, BackendSetName: "a", Weight: 1}}},
	}, {
		name: "of several fixed ports, the first becomes nodePort and the others are left to the annotation",
		in: []v1beta1.Target{
			{NodePort: 30080, BackendSetName: "a", Weight: 2},
			{NodePort: 30443, BackendSetName: "b", Weight: 1},
		},
		want: LBRegistrarSpec{NodePort: 30080, BackendSetName: "a", Weight: 2},
	}, {
		name: "a lone fixed port v1alpha1 cannot say all of still becomes nodePort",
		in:   []v1beta1.Target{{NodePort: 30080, FilterByEndpoints: true, BackendSetName: "a", Weight: 3}},
		want: LBRegistrarSpec{NodePort: 30080, BackendSetName: "a", Weight: 3},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := DenormalizeSpec(&v1beta1.LBRegistrarSpec{Services: tt.in})
			if diff := cmp.Diff(tt.want, got, cmpOptions...); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}
