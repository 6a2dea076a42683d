package credentials

import (
	"context"
	"errors"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/oracle/oci-go-sdk/v65/common"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/peppy-ratio/lbregistrar/api/v1beta1"
	"github.com/peppy-ratio/lbregistrar/reconciler/oci"
)

// A Secret value is kept while an LBRegistrar's API key reads it, and
// dropped once none does: when the key moves to another Secret, and when the
// resource is gone.
func TestSecretValuesKeptOnlyWhileRead(t *testing.T) {
	ctx := context.Background()
	secret := func(name string) *corev1.Secret {
		return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "keys", Name: name}, Data: map[string][]byte{"pem": []byte(name)}}
	}
	s := NewSecrets(fake.NewClientBuilder().WithObjects(secret("one"), secret("two")).Build(), nil)
	read := func(resource, secret string) {
		t.Helper()
		key := &v1beta1.APIKey{PrivateKey: v1beta1.SecretKeySource{Namespace: "keys", SecretKeyRef: v1beta1.SecretKeyRef{Name: secret, Key: "pem"}}}
		if _, err := s.Credentials(ctx, resource, key); err != nil {
			t.Fatal(err)
		}
	}
	expect := func(step string, want ...string) {
		t.Helper()
		if got := slices.Sorted(maps.Keys(s.values)); !slices.Equal(got, want) {
			t.Fatalf("%s: values kept for %v, want %v", step, got, want)
		}
	}

	read("a", "one")
	read("b", "one")
	expect("both read one", "keys/one/pem")
	read("a", "two")
	expect("a moved to two", "keys/one/pem", "keys/two/pem")
	s.Forget("b")
	expect("b is gone", "keys/two/pem")
	s.Forget("a")
	expect("a is gone")
}

// A resource that names an identity other than an API key gets a condition
// naming that field, and no client.
func TestKeylessIdentityIsNamed(t *testing.T) {
	build := func(oci.Credentials) (struct{}, error) {
		t.Fatal("no client may be built")
		return struct{}{}, nil
	}
	for field, spec := range map[string]v1beta1.LBRegistrarSpec{
		"spec.workloadIdentity":  {WorkloadIdentity: &v1beta1.WorkloadIdentity{Region: "ap-tokyo-1"}},
		"spec.instancePrincipal": {InstancePrincipal: &v1beta1.InstancePrincipal{Region: "ap-tokyo-1"}},
	} {
		_, err := ClientFor(context.Background(), NewSecrets(nil, nil), Builders[struct{}]{Key: build}, &v1beta1.LBRegistrar{Spec: spec})
		var ce *Error
		if !errors.As(err, &ce) || !strings.HasPrefix(ce.Message, field+":") {
			t.Errorf("%s: err = %v, want an *Error naming the field", field, err)
		}
	}
}

// A sign-in still under way is SigningIn, naming the field, and tried
// again soon; it is no failure.
func TestSignInUnderWay(t *testing.T) {
	b := Builders[struct{}]{
		Session: func(string, string, func() (common.ConfigurationProvider, error)) (struct{}, error) {
			return struct{}{}, oci.ErrSigningIn
		},
		WorkloadIdentity: &WorkloadIdentity{},
		AllowController:  true,
		ControllerUser:   "system:serviceaccount:lbregistrar-system:lbregistrar",
	}
	for field, spec := range map[string]v1beta1.LBRegistrarSpec{
		"spec.workloadIdentity":  {WorkloadIdentity: &v1beta1.WorkloadIdentity{Region: "ap-tokyo-1"}},
		"spec.instancePrincipal": {InstancePrincipal: &v1beta1.InstancePrincipal{Region: "ap-tokyo-1"}},
	} {
		_, err := ClientFor(context.Background(), NewSecrets(nil, nil), b, &v1beta1.LBRegistrar{Spec: spec})
		var ce *Error
		if !errors.As(err, &ce) || ce.Reason != "SigningIn" || !ce.Retry || !strings.HasPrefix(ce.Message, field+":") {
			t.Errorf("%s: err = %#v, want SigningIn naming the field, tried again", field, err)
		}
	}
}
