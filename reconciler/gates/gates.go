// Package gates is the controller of lbregistrar's readiness gates: for
// each pod that carries the gate, it sets the gate's condition from the
// targets that gate the pod (decide.Gates) and what the last reconcile of
// each of their LBRegistrars found (readiness.Decide, over the
// readiness.Store the reconciles fill). It writes nothing but that
// condition, and wakes the LBRegistrars a waiting pod waits for, so that
// they read their backend sets' health.
package gates

import (
	"context"
	"encoding/json"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/peppy-ratio/lbregistrar/api/v1beta1"
	"github.com/peppy-ratio/lbregistrar/reconciler/decide"
	"github.com/peppy-ratio/lbregistrar/reconciler/desired"
	"github.com/peppy-ratio/lbregistrar/reconciler/lanes"
	"github.com/peppy-ratio/lbregistrar/reconciler/metrics"
	"github.com/peppy-ratio/lbregistrar/reconciler/readiness"
)

// A pod whose gate is not yet True is looked at again, and its
// LBRegistrars woken to read their backend sets' health, at OCI's next
// health check of its backend where that is known, else after
// recheckAfter; after a quarter of the time it has waited once that is
// longer, and at most after recheckMax. A pod blocked
// because the controller cannot write is looked at every recheckMax:
// what unblocks it (a spec, a Secret, OCI) wakes its resource anyway.
const recheckAfter, recheckMax = 2 * time.Second, 30 * time.Second

// recheckFloor bounds how soon a pod waiting for OCI's next health check
// is looked at again, whatever the health checker's interval.
const recheckFloor = 100 * time.Millisecond

// Controller decides the readiness gates.
type Controller struct {
	Client client.Client // the cache
	Events events.EventRecorder
	// Seen is what the LBRegistrars' reconciles found.
	Seen *readiness.Store
	// Registrars wakes an LBRegistrar's reconcile.
	Registrars *lanes.Wakeups
	// DryRun lets every pod through: a controller that writes nothing must
	// not keep the rollouts of the namespaces that opted in waiting.
	DryRun bool
	// BackendHealth is serve --backend-health: without health reads, a
	// registered backend is enough.
	BackendHealth bool
	// Workers is how many pods are decided at once: the pods one write
	// let through have their gates opened together, not one patch after
	// another, so their Deployment sees them available together and
	// starts the next pods together.
	Workers int

	waits   waits         // the pods whose gate is False
	wakeups lanes.Wakeups // has them decide again
}

// SetupWithManager adds the controller to mgr. Only pods that carry
// lbregistrar's gate are in the cache.
func (c *Controller) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		Named("readiness-gates").
		For(&corev1.Pod{}).
		Watches(&discoveryv1.EndpointSlice{}, handler.EnqueueRequestsFromMapFunc(gatedPodsOf)).
		Watches(&v1beta1.LBRegistrar{}, handler.EnqueueRequestsFromMapFunc(c.waits.on)).
		WatchesRawSource(&c.wakeups).
		WithOptions(controller.Options{MaxConcurrentReconciles: max(c.Workers, 1)}).
		Complete(reconcile.Func(c.reconcile))
}

// Learned has the pods waiting for resource decide again, now that its
// reconcile has put what it found in Seen: a backend health read makes a
// gate turn as soon as it can, not at its next look.
func (c *Controller) Learned(resource string) {
	for _, pod := range c.waits.waitingOn(resource) {
		c.wakeups.WakeKey(pod)
	}
}

// gatedPodsOf maps a slice to the pods of its endpoints a gate may be
// keeping waiting (desired.WaitingPod); those without the gate are not in the cache
// and are passed over.
func gatedPodsOf(_ context.Context, obj client.Object) []reconcile.Request {
	s, ok := obj.(*discoveryv1.EndpointSlice)
	if !ok {
		return nil
	}
	var reqs []reconcile.Request
	for k := range s.Endpoints {
		if key, waiting := desired.WaitingPod(&s.Endpoints[k]); waiting {
			reqs = append(reqs, reconcile.Request{NamespacedName: key})
		}
	}
	return reqs
}

func (c *Controller) reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	var pod corev1.Pod
	if err := c.Client.Get(ctx, req.NamespacedName, &pod); err != nil {
		c.waits.done(req.NamespacedName)
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	// A gate once True stays so: the gate delays a pod's first Ready, and
	// turning it False on a failed health check would take the pod out of
	// every Service's endpoints, in the cluster too, for the load
	// balancer's sake.
	if pod.DeletionTimestamp != nil || !desired.HasGate(&pod) || desired.GateTrue(&pod) {
		c.waits.done(req.NamespacedName)
		return reconcile.Result{}, nil
	}
	v := readiness.Verdict{Ready: true, Reason: v1beta1.ReasonNotRegistered,
		Message: "serve --dry-run writes nothing to OCI, so the pod does not wait for it"}
	var gates []desired.Gate
	if !c.DryRun { // a dry run must not keep every rollout of the namespaces that opted in waiting
		var err error
		if gates, err = decide.Gates(ctx, c.Client, &pod); err != nil {
			return reconcile.Result{}, err
		}
		// A pod whose containers are not ready is not registered yet, and
		// its update brings it back; unless nothing is to be waited for
		// (released, or gated by nothing), when it is let through at once.
		if !desired.AwaitsGate(&pod) && !readiness.Unconditional(gates) {
			c.waits.done(req.NamespacedName)
			return reconcile.Result{}, nil
		}
		v = readiness.Decide(gates, pod.UID, c.Seen.Get, c.BackendHealth)
	}
	since, changed, err := SetGate(ctx, c.Client, &pod, v)
	if err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if changed && (v.Reason != v1beta1.ReasonLoadBalancerReady && v.Reason != v1beta1.ReasonLoadBalancerPending) {
		kind := corev1.EventTypeNormal
		if !v.Ready {
			kind = corev1.EventTypeWarning
		}
		c.Events.Eventf(&pod, nil, kind, v.Reason, "ReadinessGate", "%s", v.Message)
	}
	if v.Ready {
		c.waits.done(req.NamespacedName)
		return reconcile.Result{}, nil
	}
	c.waits.waiting(req.NamespacedName, since, v.Wait, registrarsOf(gates))
	if v.Wait == readiness.WaitBlocked {
		return reconcile.Result{RequeueAfter: recheckMax}, nil
	}
	// Health is read by the reconciles: wake them (one wake each however
	// many pods wait), and look again: when OCI's health may have changed
	// (its next check), else after recheckAfter; less often the longer the
	// pod has waited, so a backend that never passes costs its set a read
	// and a health read every half minute, not every few seconds.
	soonest := recheckAfter
	if !v.RecheckAt.IsZero() {
		soonest = max(time.Until(v.RecheckAt), recheckFloor)
	}
	wait := min(max(soonest, time.Since(since)/4), recheckMax)
	for _, name := range registrarsOf(gates) {
		c.Registrars.After(name, wait)
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

// SetGate writes the gate's condition as v says when it changes, as a
// strategic merge patch of the pod's status that touches that condition
// alone (the cached pod is trimmed: a whole status written back would drop
// the rest) and carries the pod's UID, which the API server checks, so a
// pod deleted and created again under its name never gets its
// predecessor's verdict (as the kubelet's status manager patches, and
// aws-load-balancer-controller and oci-native-ingress-controller). It
// returns since when the condition has had its status, and whether it
// wrote.
func SetGate(ctx context.Context, c client.Client, pod *corev1.Pod, v readiness.Verdict) (time.Time, bool, error) {
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

// GatedPodChanged passes the pod events a registration depends on: a pod
// gone, whether it is ready but for the gate (desired.ReadyButForGate:
// its containers ready or not, its deletion), a pod starting to await the
// gate; of pods added, those awaiting it already (listed at a start). A
// pod just made is not registered yet, and its event would open a batch
// (--endpoint-batch-period) before the changes that matter: its
// containers becoming ready. Nor does its gate opening pass: a pod ready
// but for the gate stands registered as ready already, so that asks for
// no write either. Every change of ReadyButForGate passes, whatever the
// gate: the slices' predicate (desired.EndpointsChanged) reads an
// endpoint's pod as the cache has it now, and counts on this one for a
// change of it.
func GatedPodChanged() predicate.Predicate {
	return predicate.Funcs{
		CreateFunc: func(e event.CreateEvent) bool {
			pod, ok := e.Object.(*corev1.Pod)
			return !ok || desired.AwaitsGate(pod)
		},
		UpdateFunc: func(e event.UpdateEvent) bool {
			old, okOld := e.ObjectOld.(*corev1.Pod)
			cur, okCur := e.ObjectNew.(*corev1.Pod)
			return !okOld || !okCur || (old.DeletionTimestamp == nil) != (cur.DeletionTimestamp == nil) ||
				desired.ReadyButForGate(old) != desired.ReadyButForGate(cur) || !desired.AwaitsGate(old) && desired.AwaitsGate(cur)
		},
	}
}

// AwaitsHealth reports whether a pod waits for OCI to find its backend
// healthy in a backend set of resource.
func (c *Controller) AwaitsHealth(resource string) bool { return c.waits.awaitsHealth(resource) }

// ByGatedPod maps a gated pod to the resources whose targets gate it: one
// whose containers became ready waits for them to register it.
func (c *Controller) ByGatedPod(ctx context.Context, obj client.Object) []reconcile.Request {
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return nil
	}
	gates, err := decide.Gates(ctx, c.Client, pod)
	if err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "listing the targets that gate a pod")
		return nil
	}
	names := registrarsOf(gates)
	reqs := make([]reconcile.Request, len(names))
	for i, name := range names {
		reqs[i] = reconcile.Request{NamespacedName: types.NamespacedName{Name: name}}
	}
	return reqs
}

// waits are the pods whose gate is False, since when and why, which
// the metrics count (metrics.GatesWaiting, metrics.OldestGateWaitStart).
type waits struct {
	mu sync.Mutex
	m  map[types.NamespacedName]podWait
}

type podWait struct {
	since      time.Time
	why        string
	registrars []string // the resources it waits for
}

func (g *waits) waiting(pod types.NamespacedName, since time.Time, why string, registrars []string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.m == nil {
		g.m = map[types.NamespacedName]podWait{}
	}
	g.m[pod] = podWait{since, why, registrars}
	g.export()
}

// on maps a change of an LBRegistrar (its spec, a release, its deletion)
// to the pods waiting for it, which decide again at once.
func (g *waits) on(_ context.Context, obj client.Object) []reconcile.Request {
	pods := g.waitingOn(obj.GetName())
	reqs := make([]reconcile.Request, len(pods))
	for i, pod := range pods {
		reqs[i] = reconcile.Request{NamespacedName: pod}
	}
	return reqs
}

// waitingOn are the pods waiting for resource.
func (g *waits) waitingOn(resource string) []types.NamespacedName {
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

func (g *waits) awaitsHealth(resource string) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, w := range g.m {
		if w.why == readiness.WaitHealth && slices.Contains(w.registrars, resource) {
			return true
		}
	}
	return false
}

func (g *waits) done(pod types.NamespacedName) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if _, ok := g.m[pod]; ok {
		delete(g.m, pod)
		g.export()
	}
}

func (g *waits) export() {
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
