package reconciler

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sync"
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
	"github.com/peppy-ratio/lbregistrar/reconciler/metrics"
	"github.com/peppy-ratio/lbregistrar/reconciler/oci"
	"github.com/peppy-ratio/lbregistrar/reconciler/plan"
	"github.com/peppy-ratio/lbregistrar/reconciler/readiness"
)

// A pod whose gate is not yet True is looked at again, and its
// LBRegistrars woken to read their backend sets' health, at OCI's next
// health check of its backend where that is known, else after
// gatePending; after a quarter of the time it has waited once that is
// longer, and at most after gatePendingMax. A pod held
// because the controller cannot write is looked at every gatePendingMax:
// what unblocks it (a spec, a Secret, OCI) wakes its resource anyway.
const gatePending, gatePendingMax = 2 * time.Second, 30 * time.Second

// gateRecheckFloor bounds how soon a pod waiting for OCI's next health check
// is looked at again, whatever the health checker's interval.
const gateRecheckFloor = 100 * time.Millisecond

// setupGates adds the controller of the readiness gates: for each pod that
// carries lbregistrar's (only those are cached), it sets the gate's
// condition from the targets that gate the pod (decide.Gates) and what the
// last reconcile of each of their resources found (readiness.Decide).
func (r *Reconciler) setupGates(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		Named("readiness-gates").
		For(&corev1.Pod{}).
		Watches(&discoveryv1.EndpointSlice{}, handler.EnqueueRequestsFromMapFunc(gatedPodsOf)).
		Watches(&v1beta1.LBRegistrar{}, handler.EnqueueRequestsFromMapFunc(r.gateWaits.on)).
		WatchesRawSource(&r.gateWakeups).
		Complete(reconcile.Func(r.reconcileGate))
}

// gatedPodsOf maps a slice to the pods of its endpoints a gate may be
// holding (desired.WaitingPod); those without the gate are not in the cache
// and are passed over.
func gatedPodsOf(_ context.Context, obj client.Object) []reconcile.Request {
	s, ok := obj.(*discoveryv1.EndpointSlice)
	if !ok {
		return nil
	}
	var reqs []reconcile.Request
	for k := range s.Endpoints {
		if key, held := desired.WaitingPod(&s.Endpoints[k]); held {
			reqs = append(reqs, reconcile.Request{NamespacedName: key})
		}
	}
	return reqs
}

func (r *Reconciler) reconcileGate(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	var pod corev1.Pod
	if err := r.client.Get(ctx, req.NamespacedName, &pod); err != nil {
		r.gateWaits.done(req.NamespacedName)
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	// A gate once True stays so: the gate holds a pod's first Ready, and
	// turning it False on a failed health check would take the pod out of
	// every Service's endpoints, in the cluster too, for the load
	// balancer's sake.
	if pod.DeletionTimestamp != nil || !desired.HasGate(&pod) || desired.GateTrue(&pod) {
		r.gateWaits.done(req.NamespacedName)
		return reconcile.Result{}, nil
	}
	v := readiness.Verdict{Ready: true, Reason: v1beta1.ReasonNotRegistered,
		Message: "serve --dry-run writes nothing to OCI, so the pod does not wait for it"}
	var gates []desired.Gate
	if !r.opts.DryRun { // a dry run must not hold every rollout of the namespaces that opted in
		var err error
		if gates, err = decide.Gates(ctx, r.client, &pod); err != nil {
			return reconcile.Result{}, err
		}
		// A pod whose containers are not ready is not registered yet, and
		// its update brings it back; unless nothing is to be waited for
		// (released, or gated by nothing), when it is let through at once.
		if !desired.AwaitsGate(&pod) && !readiness.Unconditional(gates) {
			r.gateWaits.done(req.NamespacedName)
			return reconcile.Result{}, nil
		}
		v = readiness.Decide(gates, pod.UID, r.seen.Get, r.opts.BackendHealth)
	}
	since, changed, err := setGate(ctx, r.client, &pod, v)
	if err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if changed && (v.Reason != v1beta1.ReasonLoadBalancerReady && v.Reason != v1beta1.ReasonLoadBalancerPending) {
		kind := corev1.EventTypeNormal
		if !v.Ready {
			kind = corev1.EventTypeWarning
		}
		r.events.Eventf(&pod, nil, kind, v.Reason, "ReadinessGate", "%s", v.Message)
	}
	if v.Ready {
		r.gateWaits.done(req.NamespacedName)
		return reconcile.Result{}, nil
	}
	r.gateWaits.waiting(req.NamespacedName, since, v.Wait, registrarsOf(gates))
	if v.Wait == readiness.WaitBlocked {
		return reconcile.Result{RequeueAfter: gatePendingMax}, nil
	}
	// Health is read by the reconciles: wake them (one wake each however
	// many pods wait), and look again: when OCI's health may have changed
	// (its next check), else after gatePending; less often the longer the
	// pod has waited, so a backend that never passes costs its set a read
	// and a health read every half minute, not every few seconds.
	soonest := gatePending
	if !v.RecheckAt.IsZero() {
		soonest = max(time.Until(v.RecheckAt), gateRecheckFloor)
	}
	wait := min(max(soonest, time.Since(since)/4), gatePendingMax)
	for _, name := range registrarsOf(gates) {
		r.wakeups.After(name, wait)
	}
	return reconcile.Result{RequeueAfter: wait}, nil
}

// registrarsOf are the resources of gates, each once.
func registrarsOf(gates []desired.Gate) []string {
	names := make([]string, 0, len(gates))
	for _, g := range gates {
		names = append(names, g.LBRegistrar)
	}
	slices.Sort(names)
	return slices.Compact(names)
}

// setGate writes the gate's condition as v says when it changes, as a
// strategic merge patch of the pod's status that touches that condition
// alone (the cached pod is trimmed: a whole status written back would drop
// the rest) and carries the pod's UID, which the API server checks, so a
// pod deleted and created again under its name never gets its
// predecessor's verdict (as the kubelet's status manager patches, and
// aws-load-balancer-controller and oci-native-ingress-controller). It
// returns since when the condition has had its status, and whether it
// wrote.
func setGate(ctx context.Context, c client.Client, pod *corev1.Pod, v readiness.Verdict) (time.Time, bool, error) {
	cond := corev1.PodCondition{Type: v1beta1.ReadinessGate, Status: corev1.ConditionFalse, Reason: v.Reason, Message: v.Message, LastTransitionTime: metav1.Now()}
	if v.Ready {
		cond.Status = corev1.ConditionTrue
	}
	for _, c := range pod.Status.Conditions {
		if c.Type == v1beta1.ReadinessGate && c.Status == cond.Status {
			if c.Message == cond.Message && c.Reason == cond.Reason {
				return c.LastTransitionTime.Time, false, nil
			}
			cond.LastTransitionTime = c.LastTransitionTime
		}
	}
	patch, err := gatePatch(pod.UID, cond)
	if err != nil {
		return time.Time{}, false, err
	}
	return cond.LastTransitionTime.Time, true, c.Status().Patch(ctx, pod, client.RawPatch(types.StrategicMergePatchType, patch))
}

// gatePatch is the status patch that sets cond on the pod uid.
func gatePatch(uid types.UID, cond corev1.PodCondition) ([]byte, error) {
	return json.Marshal(map[string]any{
		"metadata": map[string]any{"uid": uid},
		"status":   map[string]any{"conditions": []corev1.PodCondition{cond}},
	})
}

// learnGates records, for the readiness gates, what this flight found of
// its backend sets (readiness.Record): each as it now holds backends, with
// what the desired state made of the gated pods and what kept wanted
// backends out; a set that belongs to another resource, blocked by that.
func (r *Reconciler) learnGates(s *scope, writes []*setWrite, health map[string]*oci.BackendSetHealth, readAt time.Time) {
	rec := readiness.Record{Generation: s.obj.Generation, Sets: map[string]*readiness.Set{}}
	for _, w := range writes {
		if w.job.Mode != plan.Apply && w.job.Mode != plan.Hold {
			continue
		}
		blocked := w.blocked
		if w.job.Held != nil {
			blocked = cmp.Or(blocked, "its desired state is held: "+w.job.Held.Message)
		}
		rec.Sets[w.job.Name] = readiness.NewSet(w.after, health[w.job.Name], readAt, w.read.HealthSchedule(), w.job.Stands, blocked)
	}
	for name, keeper := range s.out.Lost {
		rec.Sets[name] = readiness.NewSet(nil, nil, time.Time{}, oci.HealthSchedule{}, nil, fmt.Sprintf("LBRegistrar %s keeps this backend set (Conflict), so this resource writes nothing there", keeper))
	}
	r.seen.Put(s.obj.Name, rec, time.Now())
	r.wakeGates(s.obj.Name)
}

// gatesBlocked records, for the readiness gates, that nothing of obj is
// written, and why.
func (r *Reconciler) gatesBlocked(obj *v1beta1.LBRegistrar, why string) {
	r.seen.Put(obj.Name, readiness.Record{Generation: obj.Generation, Blocked: why}, time.Now())
	r.wakeGates(obj.Name)
}

// wakeGates has the pods waiting for resource decide again, now that its
// reconcile has found what they wait for: a backend health read makes a
// gate turn as soon as it can, not at its next look.
func (r *Reconciler) wakeGates(resource string) {
	for _, pod := range r.gateWaits.waitingOn(resource) {
		r.gateWakeups.WakeKey(pod)
	}
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

// byGatedPod maps a gated pod to the resources whose targets gate it: one
// whose containers became ready waits for them to register it.
func (r *Reconciler) byGatedPod(ctx context.Context, obj client.Object) []reconcile.Request {
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return nil
	}
	gates, err := decide.Gates(ctx, r.client, pod)
	if err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "listing the entries that gate a pod")
		return nil
	}
	names := registrarsOf(gates)
	reqs := make([]reconcile.Request, len(names))
	for i, name := range names {
		reqs[i] = reconcile.Request{NamespacedName: types.NamespacedName{Name: name}}
	}
	return reqs
}

// gateWaits are the pods whose gate is False, since when and why, which
// the metrics count (metrics.GatesWaiting, metrics.OldestGateWaitStart).
type gateWaits struct {
	mu sync.Mutex
	m  map[types.NamespacedName]gateWait
}

type gateWait struct {
	since      time.Time
	why        string
	registrars []string // the resources it waits for
}

func (g *gateWaits) waiting(pod types.NamespacedName, since time.Time, why string, registrars []string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.m == nil {
		g.m = map[types.NamespacedName]gateWait{}
	}
	g.m[pod] = gateWait{since, why, registrars}
	g.export()
}

// on maps a change of an LBRegistrar (its spec, a release, its deletion)
// to the pods waiting for it, which decide again at once.
func (g *gateWaits) on(_ context.Context, obj client.Object) []reconcile.Request {
	pods := g.waitingOn(obj.GetName())
	reqs := make([]reconcile.Request, len(pods))
	for i, pod := range pods {
		reqs[i] = reconcile.Request{NamespacedName: pod}
	}
	return reqs
}

// waitingOn are the pods waiting for resource.
func (g *gateWaits) waitingOn(resource string) []types.NamespacedName {
	g.mu.Lock()
	defer g.mu.Unlock()
	var out []types.NamespacedName
	for pod, w := range g.m {
		if slices.Contains(w.registrars, resource) {
			out = append(out, pod)
		}
	}
	return out
}

func (g *gateWaits) done(pod types.NamespacedName) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if _, ok := g.m[pod]; ok {
		delete(g.m, pod)
		g.export()
	}
}

func (g *gateWaits) export() {
	counts := map[string]int{}
	var oldest time.Time
	for _, w := range g.m {
		counts[w.why]++
		if oldest.IsZero() || w.since.Before(oldest) {
			oldest = w.since
		}
	}
	for _, why := range []string{readiness.WaitRegistering, readiness.WaitHealth, readiness.WaitBlocked} {
		metrics.GatesWaiting.WithLabelValues(why).Set(float64(counts[why]))
	}
	start := 0.0
	if !oldest.IsZero() {
		start = float64(oldest.UnixNano()) / 1e9
	}
	metrics.OldestGateWaitStart.Set(start)
}
