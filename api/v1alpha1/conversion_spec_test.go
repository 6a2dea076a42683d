package v1alpha1

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/peppy-ratio/lbregistrar/api/v1beta1"
)

const lbID = "ocid1.loadbalancer.oc1.ap-tokyo-1.aaa"

func TestNormalizeSpecCarriesAPIKey(t *testing.T) {
	in := LBRegistrarSpec{APIKey: APIKeySpec{
		User: "u", Fingerprint: "f", Tenancy: "t", Region: "r",
		PrivateKey: SecretKeySpec{Namespace: "ns", SecretKeyRef: SecretKeyRef{Name: "n", Key: "k"}},
	}}
	want := &v1beta1.APIKey{
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
