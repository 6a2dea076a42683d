package nodeviews

import (
	"context"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
)

// A selector's nodes are listed once until a node changes; a list that
// copies (no UnsafeDisableDeepCopy) always reads the cache.
func TestNodeViewsServeUntilANodeChanges(t *testing.T) {
	ctx := context.Background()
	node := func(name, pool string) *corev1.Node {
		return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"pool": pool}}}
	}
	c := fake.NewClientBuilder().WithObjects(node("a", "ingress"), node("b", "batch")).Build()
	v := New(c)
	names := func(opts ...client.ListOption) []string {
		t.Helper()
		var list corev1.NodeList
		if err := v.List(ctx, &list, opts...); err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, n := range list.Items {
			out = append(out, n.Name)
		}
		return out
	}
	ingress := []client.ListOption{client.MatchingLabels{"pool": "ingress"}, client.UnsafeDisableDeepCopy}
	all := []client.ListOption{client.UnsafeDisableDeepCopy}
	if got := names(ingress...); !slices.Equal(got, []string{"a"}) {
		t.Fatalf("ingress nodes: %v", got)
	}
	if got := names(all...); !slices.Equal(got, []string{"a", "b"}) {
		t.Fatalf("all nodes: %v", got)
	}
	// The fake's store changes without an event: the views stand.
	if err := c.Create(ctx, node("c", "ingress")); err != nil {
		t.Fatal(err)
	}
	if got := names(ingress...); !slices.Equal(got, []string{"a"}) {
		t.Errorf("before the event, ingress nodes %v, want the view [a]", got)
	}
	if got := names(client.MatchingLabels{"pool": "ingress"}); !slices.Equal(got, []string{"a", "c"}) {
		t.Errorf("a copying list: %v, want [a c] from the cache", got)
	}
	v.Changed()
	if got := names(ingress...); !slices.Equal(got, []string{"a", "c"}) {
		t.Errorf("after the event, ingress nodes %v, want [a c]", got)
	}
	if got := names(all...); !slices.Equal(got, []string{"a", "b", "c"}) {
		t.Errorf("after the event, all nodes %v, want [a b c]", got)
	}
}
