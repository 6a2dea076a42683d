package decide

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/peppy-ratio/lbregistrar/api/v1beta1"
)

// TestViewHoldsOnlySelectedNodes: the view of a resource with a node
// selector has the nodes it matches, read so from the cache; with an
// invalid one, every node, for desired.Compute to report the selector.
func TestViewHoldsOnlySelectedNodes(t *testing.T) {
	node := func(name, pool string) *corev1.Node {
		return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"pool": pool}}}
	}
	reader := fake.NewClientBuilder().WithObjects(node("a", "ingress"), node("b", "batch"), node("c", "ingress")).Build()
	for _, tc := range []struct {
		name     string
		selector *metav1.LabelSelector
		want     []string
	}{
		{"no selector", nil, []string{"a", "b", "c"}},
		{"a pool", &metav1.LabelSelector{MatchLabels: map[string]string{"pool": "ingress"}}, []string{"a", "c"}},
		{"invalid", &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "pool", Operator: "Near"}}}, []string{"a", "b", "c"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			obj := &v1beta1.LBRegistrar{Spec: v1beta1.LBRegistrarSpec{NodeSelector: tc.selector}}
			view, err := readView(t.Context(), reader, obj)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, n := range view.Nodes {
				got = append(got, n.Name)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("nodes in the view (-want +got):\n%s", diff)
			}
		})
	}
}
