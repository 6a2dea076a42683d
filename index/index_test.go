package index

import (
	"context"
	"slices"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/peppy-ratio/lbregistrar/api"
	"github.com/peppy-ratio/lbregistrar/api/v1alpha1"
	"github.com/peppy-ratio/lbregistrar/api/v1beta1"
	"github.com/peppy-ratio/lbregistrar/api/validation"
)

const lb = "ocid1.loadbalancer.oc1.ap-tokyo-1.aaaaaaaaexample"

func registrar(name string, backendSets ...string) *v1beta1.LBRegistrar {
	obj := &v1beta1.LBRegistrar{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: v1beta1.LBRegistrarSpec{LoadBalancerID: lb}}
	for _, set := range backendSets {
		obj.Spec.Services = append(obj.Spec.Services, v1beta1.Target{NodePort: 30000, BackendSetName: set})
	}
	return obj
}

func TestKeys(t *testing.T) {
	got := ClaimFieldKeys(registrar("a", "ingress", "edge", "ingress"))
	if want := []string{validation.ClaimKey(lb, "ingress"), validation.ClaimKey(lb, "edge")}; !slices.Equal(got, want) {
		t.Errorf("ClaimFieldKeys = %q, want %q", got, want)
	}
	if ClaimFieldKeys(&v1alpha1.LBRegistrar{}) != nil {
		t.Error("ClaimFieldKeys of another type should be nil")
	}
}

// ClaimingAny finds every resource sharing a backend set of the spec, once each.
func TestOfSpec(t *testing.T) {
	c := fake.NewClientBuilder().WithScheme(api.NewScheme()).
		WithIndex(&v1beta1.LBRegistrar{}, ClaimField, ClaimFieldKeys).
		WithObjects(registrar("both", "ingress", "edge"), registrar("one", "edge"), registrar("other", "admin")).Build()
	found, err := ClaimingAny(context.Background(), c, &registrar("new", "ingress", "edge").Spec)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, o := range found {
		names = append(names, o.Name)
	}
	slices.Sort(names)
	if want := []string{"both", "one"}; !slices.Equal(names, want) {
		t.Errorf("ClaimingAny found %q, want %q", names, want)
	}
}
