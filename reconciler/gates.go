package reconciler

import (
	"context"
	"encoding/json"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/peppy-ratio/lbregistrar/api/v1beta1"
	"github.com/peppy-ratio/lbregistrar/reconciler/decide"
	"github.com/peppy-ratio/lbregistrar/reconciler/desired"
	"github.com/peppy-ratio/lbregistrar/reconciler/readiness"
)

// A pod whose gate is not yet True is looked at again, and its
// LBRegistrars woken to read their backend sets' health, after a quarter
// of the time it has waited, from gatePending to gatePendingMax.
const gatePending, gatePendingMax = 2 * time.Second, 30 * time.Second

// setupGates adds the controller of the readiness gates: for each pod that
// carries lbregistrar's (only those are cached), it sets the gate's
// condition from what the reconciles last saw of the backend sets that
// register the pod (readiness.Decide).
func (r *Reconciler) setupGates(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		Named("readiness-gates").
		For(&corev1.Pod{}).
		Watches(&discoveryv1.EndpointSlice{}, handler.EnqueueRequestsFromMapFunc(gatedPodsOf)).
		Complete(reconcile.Func(r.reconcileGate))
}

// gatedPodsOf maps a slice to the pods of its endpoints a gate may be
// holding (desired.HeldPod); those without the gate are not in the cache
// and are passed over.
func gatedPodsOf(_ context.Context, obj client.Object) []reconcile.Request {
	s, ok := obj.(*discoveryv1.EndpointSlice)
	if !ok {
		return nil
	}
	var reqs []reconcile.Request
	for k := range s.Endpoints {
		if key, held := desired.HeldPod(&s.Endpoints[k]); held {
			reqs = append(reqs, reconcile.Request{NamespacedName: key})
		}
	}
	return reqs
}

func (r *Reconciler) reconcileGate(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	var pod corev1.Pod
	if err := r.client.Get(ctx, req.NamespacedName, &pod); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	// A gate once True stays so: the gate holds a pod's first Ready, and
	// turning it False on a failed health check would take the pod out of
	// every Service's endpoints, in the cluster too, for the load
	// balancer's sake.
	if pod.DeletionTimestamp != nil || !desired.HasGate(&pod) || desired.GateTrue(&pod) {
		return reconcile.Result{}, nil
	}
	if r.opts.DryRun {
		// Nothing is registered, so nothing is waited for: a dry run must
		// not hold every rollout of the namespaces that opted in.
		_, err := r.setGate(ctx, &pod, true, "serve --dry-run writes nothing to OCI, so the pod does not wait for it")
		return reconcile.Result{}, err
	}
	expected, registrars, err := r.expectations(ctx, &pod)
	if err != nil {
		return reconcile.Result{}, err
	}
	ready, message := readiness.Decide(expected, r.seen.Get)
	since, err := r.setGate(ctx, &pod, ready, message)
	if err != nil || ready {
		return reconcile.Result{}, err
	}
	// Health is read by the reconciles: wake them (one wake each however
	// many pods wait), and look again; less often the longer the pod has
	// waited, so a backend that never passes costs its set a read and a
	// health read every half minute, not every two seconds.
	wait := min(max(gatePending, time.Since(since)/4), gatePendingMax)
	for _, name := range registrars {
		r.wakeups.After(name, wait)
	}
	return reconcile.Result{RequeueAfter: wait}, nil
}

// expectations are the backend sets that register pod, with the backends
// standing for it there, and the LBRegistrars they belong to. They follow
// the Services that select the pod, not its EndpointSlices: a pod the
// EndpointSlice controller has not listed yet is awaited, not let through.
func (r *Reconciler) expectations(ctx context.Context, pod *corev1.Pod) ([]readiness.Expectation, []string, error) {
	services, err := r.servicesSelecting(ctx, pod)
	if err != nil {
		return nil, nil, err
	}
	var node *corev1.Node
	if pod.Spec.NodeName != "" {
		var n corev1.Node
		if err := r.client.Get(ctx, types.NamespacedName{Name: pod.Spec.NodeName}, &n); err == nil {
			node = &n
		}
	}
	var expected []readiness.Expectation
	var names []string
	for _, svc := range services {
		key := client.ObjectKeyFromObject(svc)
		var registrars v1beta1.LBRegistrarList
		if err := r.client.List(ctx, &registrars, client.MatchingFields{serviceIndex: key.String()}, client.UnsafeDisableDeepCopy); err != nil {
			return nil, nil, err
		}
		if len(registrars.Items) == 0 {
			continue
		}
		endpointSlices, err := decide.EndpointSlicesOf(ctx, r.client, key)
		if err != nil {
			return nil, nil, err
		}
		nodeHealthWaits := desired.HealthWaitsFor(pod, svc, endpointSlices)
		for _, reg := range registrars.Items {
			if reg.DeletionTimestamp != nil || reg.Spec.Suspend {
				continue
			}
			for _, t := range reg.Spec.Services {
				if t.Namespace != key.Namespace || t.Name != key.Name || !desired.GatesPods(&t, svc) {
					continue
				}
				backends, listed := desired.BackendsOf(pod, &t, svc, endpointSlices, node)
				if listed && len(backends) == 0 {
					continue // listed without the target's port: not registered for it
				}
				expected = append(expected, readiness.Expectation{LBRegistrar: reg.Name, LoadBalancerID: reg.Spec.LoadBalancerID,
					BackendSet: t.BackendSetName, Backends: backends, Healthy: t.Pods() || !nodeHealthWaits})
				names = append(names, reg.Name)
			}
		}
	}
	return expected, names, nil
}

// servicesSelecting are the Services of pod's namespace that select it.
func (r *Reconciler) servicesSelecting(ctx context.Context, pod *corev1.Pod) ([]*corev1.Service, error) {
	var list corev1.ServiceList
	if err := r.client.List(ctx, &list, client.InNamespace(pod.Namespace), client.UnsafeDisableDeepCopy); err != nil {
		return nil, err
	}
	var out []*corev1.Service
	for i := range list.Items {
		if desired.Selects(&list.Items[i], pod) {
			out = append(out, &list.Items[i])
		}
	}
	return out, nil
}

// setGate writes the gate's condition when it changes, as a strategic
// merge patch of the pod's status that touches that condition alone (the
// cached pod is trimmed: a whole status written back would drop the rest).
// It returns since when the condition has had its status.
func (r *Reconciler) setGate(ctx context.Context, pod *corev1.Pod, ready bool, message string) (time.Time, error) {
	cond := corev1.PodCondition{Type: v1beta1.ReadinessGate, Status: corev1.ConditionFalse, Reason: v1beta1.ReasonLoadBalancerPending, Message: message, LastTransitionTime: metav1.Now()}
	if ready {
		cond.Status, cond.Reason = corev1.ConditionTrue, v1beta1.ReasonLoadBalancerReady
	}
	for _, c := range pod.Status.Conditions {
		if c.Type == v1beta1.ReadinessGate && c.Status == cond.Status {
			if c.Message == message {
				return c.LastTransitionTime.Time, nil
			}
			cond.LastTransitionTime = c.LastTransitionTime
		}
	}
	patch, err := json.Marshal(map[string]any{"status": map[string]any{"conditions": []corev1.PodCondition{cond}}})
	if err != nil {
		return time.Time{}, err
	}
	return cond.LastTransitionTime.Time, r.client.Status().Patch(ctx, pod, client.RawPatch(types.StrategicMergePatchType, patch))
}

// gatedPodChanged passes the pod events a registration depends on: a pod
// added or gone, its containers becoming ready or not, its deletion.
func gatedPodChanged() predicate.Predicate {
	return predicate.Funcs{
		UpdateFunc: func(e event.UpdateEvent) bool {
			old, okOld := e.ObjectOld.(*corev1.Pod)
			cur, okCur := e.ObjectNew.(*corev1.Pod)
			return !okOld || !okCur || desired.AwaitsGate(old) != desired.AwaitsGate(cur) || (old.DeletionTimestamp == nil) != (cur.DeletionTimestamp == nil)
		},
	}
}

// byGatedPod maps a gated pod to the resources registering the Services
// that select it: one whose containers became ready waits for them to
// register it.
func (r *Reconciler) byGatedPod(ctx context.Context, obj client.Object) []reconcile.Request {
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return nil
	}
	services, err := r.servicesSelecting(ctx, pod)
	if err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "listing the Services of a gated pod")
		return nil
	}
	var reqs []reconcile.Request
	for _, svc := range services {
		reqs = append(reqs, r.requests(ctx, client.MatchingFields{serviceIndex: svc.Namespace + "/" + svc.Name})...)
	}
	return reqs
}
