// Package nodeviews serves the controller's lists of nodes from views kept
// until a node changes.
package nodeviews

import (
	"context"
	"sync"
	"sync/atomic"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Views is the cached client, with the nodes each label selector
// matches (or all of them) kept from one list to the next until a node
// changes in what a desired state reads: every reconcile listed them,
// matching the selector against, and copying, every node in the cache (at
// 5,000 nodes and 100 resources, a fifth of the controller's CPU at rest in
// BenchmarkScale's profile). Only in-place lists
// (client.UnsafeDisableDeepCopy) are served so, as their items are shared.
type Views struct {
	client.Client
	// changes counts node events. A view is stored with the count read
	// before its list, so it is never older than its count says.
	changes atomic.Uint64

	mu    sync.Mutex
	views map[string]nodeView // by selector
}

// maxNodeViews bounds the views kept: selectors of resources long gone
// are dropped with the rest once there are more.
const maxNodeViews = 256

type nodeView struct {
	changes uint64
	items   []corev1.Node
}

// New is the views over c, the manager's cached client.
func New(c client.Client) *Views {
	return &Views{Client: c, views: map[string]nodeView{}}
}

// Changed makes every view stale. The node watch calls it for each event
// its predicate passes (a node added or deleted, or changed in what a
// desired state reads), after the informer's store has the change and
// before the reconciles it causes are queued, so they list afresh. Other
// updates, such as kubelets' status reports, leave the views standing:
// what differs is read by nothing the views serve.
func (v *Views) Changed() { v.changes.Add(1) }

// List lists as the cached client does, but an in-place list of nodes
// comes from the view of its selector while no node has changed.
func (v *Views) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	nodes, ok := list.(*corev1.NodeList)
	o := (&client.ListOptions{}).ApplyOptions(opts)
	if !ok || o.FieldSelector != nil || o.Limit != 0 || o.UnsafeDisableDeepCopy == nil || !*o.UnsafeDisableDeepCopy {
		return v.Client.List(ctx, list, opts...)
	}
	var key string // every node
	if o.LabelSelector != nil {
		key = "selector " + o.LabelSelector.String()
	}
	seen := v.changes.Load()
	v.mu.Lock()
	view, hit := v.views[key]
	v.mu.Unlock()
	if hit && view.changes == seen {
		nodes.Items = view.items
		return nil
	}
	if err := v.Client.List(ctx, nodes, opts...); err != nil {
		return err
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	if len(v.views) >= maxNodeViews {
		clear(v.views)
	}
	v.views[key] = nodeView{changes: seen, items: nodes.Items}
	return nil
}
