package reconciler

import (
	"context"
	"maps"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/peppy-ratio/lbregistrar/api/v1beta1"
)

// A Secret value is kept while an LBRegistrar's API key reads it, and
// dropped once none does: when the key moves to another Secret, and when the
// resource is gone.
func TestSecretValuesKeptOnlyWhileRead(t *testing.T) {
	ctx := context.Background()
	secret := func(name string) *corev1.Secret {
		return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "keys", Name: name}, Data: map[string][]byte{"pem": []byte(name)}}
	}
	r := unitReconciler(t, nil, secret("one"), secret("two"))
	read := func(resource, secret string) {
		t.Helper()
		key := &v1beta1.APIKey{PrivateKey: v1beta1.SecretKeySource{Namespace: "keys", SecretKeyRef: v1beta1.SecretKeyRef{Name: secret, Key: "pem"}}}
		if _, err := r.secrets.credentials(ctx, resource, key); err != nil {
			t.Fatal(err)
		}
	}
	gone := func(resource string) {
		t.Helper()
		if _, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: client.ObjectKey{Name: resource}}); err != nil {
			t.Fatal(err)
		}
	}
	expect := func(step string, want ...string) {
		t.Helper()
		if got := slices.Sorted(maps.Keys(r.secrets.values)); !slices.Equal(got, want) {
			t.Fatalf("%s: values kept for %v, want %v", step, got, want)
		}
	}

	read("a", "one")
	read("b", "one")
	expect("both read one", "keys/one/pem")
	read("a", "two")
	expect("a moved to two", "keys/one/pem", "keys/two/pem")
	gone("b")
	expect("b is gone", "keys/two/pem")
	gone("a")
	expect("a is gone")
}
