// Package reconciler keeps the backend sets named by each LBRegistrar
// holding exactly the backends the resource should own, and nothing else in
// the load balancer changes.
//
// One reconcile of a resource:
//  1. claims: a backend set another live resource keeps (validation.Precedes)
//     is left alone and the Conflict condition says who holds it;
//  2. credentials from the API key's Secrets (a bad key is a condition);
//  3. the load balancer's lane is taken (or the resource parks until it is
//     free), so writes to one load balancer are serialized across resources,
//     and the desired state is computed only then, so changes that arrived
//     while waiting are folded into this write;
//  4. per backend set: read, plan over the ownership record, and only when
//     something changed one UpdateBackendSet with If-Match, waited for;
//     backend sets dropped from the spec have their owned backends removed;
//  5. status: the ownership record, conditions, observedGeneration.
//
// Deleting a resource drains its own backends for the drain period, then
// removes them; a missing load balancer or backend set counts as clean, and
// after the cleanup timeout the finalizer goes regardless, so deletion never
// hangs forever.
//
// Its log lines name the load balancer and, where there is one, the backend
// set; the busy lanes, with their holders, steps and parked resources, are
// served at DebugLanesPath (see docs/operations.md).
package reconciler

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/retry"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/peppy-ratio/lbregistrar/api/v1beta1"
	"github.com/peppy-ratio/lbregistrar/api/validation"
	"github.com/peppy-ratio/lbregistrar/claims"
	"github.com/peppy-ratio/lbregistrar/reconciler/desired"
	"github.com/peppy-ratio/lbregistrar/reconciler/metrics"
	"github.com/peppy-ratio/lbregistrar/reconciler/oci"
	"github.com/peppy-ratio/lbregistrar/reconciler/plan"
)

// Finalizer holds a resource until its own backends are deregistered.
const Finalizer = "nodes.peppy-ratio.dev/deregister"

// Condition reasons beyond those of api/v1beta1.
const (
	ReasonAsExpected  = "AsExpected"
	ReasonHeld        = "Held"
	ReasonWriteFailed = "WriteFailed"
	ReasonClaimed     = "BackendSetClaimed"
	ReasonDeleting    = "Deleting"
)

// Reconciler reconciles LBRegistrar (v1beta1, the hub).
type Reconciler struct {
	client    client.Client
	apiReader client.Reader // uncached reads
	secrets   *secretValues
	events    events.EventRecorder
	clientFor func(oci.Credentials) (backendSetAPI, error)
	lanes     *lanes
	wakeups   *wakeups
	elected   <-chan struct{} // closed once this replica leads
	opts      Options
}

// wakeFunc enqueues the named resource again; it never blocks the caller.
func (r *Reconciler) wakeFunc(name string) func() {
	return func() { r.wakeups.wake(name) }
}

// Reconcile brings one LBRegistrar's backend sets in line, or cleans them up on deletion.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var obj v1beta1.LBRegistrar
	if err := r.client.Get(ctx, req.NamespacedName, &obj); err != nil {
		if apierrors.IsNotFound(err) {
			r.secrets.forget(req.Name)
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !obj.DeletionTimestamp.IsZero() {
		return r.finalize(ctx, &obj)
	}
	if !controllerutil.ContainsFinalizer(&obj, Finalizer) {
		base := obj.DeepCopy()
		controllerutil.AddFinalizer(&obj, Finalizer)
		if err := r.client.Patch(ctx, &obj, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{})); err != nil {
			return ctrl.Result{}, err
		}
	}
	return r.register(ctx, &obj)
}

// outcome gathers what one reconcile found, for the conditions.
type outcome struct {
	issues   []desired.Issue
	held     []string
	lost     map[string]string // backend set -> resource that keeps it
	failures []string
	err      error
}

func (r *Reconciler) register(ctx context.Context, obj *v1beta1.LBRegistrar) (ctrl.Result, error) {
	logger := log.FromContext(ctx).WithValues("loadBalancer", obj.Spec.LoadBalancerID)
	st := &statusWriter{client: r.client, reader: r.apiReader, obj: obj, base: obj.DeepCopy()}
	before := slices.Clone(obj.Status.Conditions)
	var out outcome

	lost, err := r.lostClaims(ctx, obj)
	if err != nil {
		return ctrl.Result{}, err
	}
	out.lost = lost
	if len(lost) > 0 {
		metrics.Conflicts.Add(float64(len(lost)))
	}

	api, err := r.api(ctx, obj)
	if err != nil {
		var ce *credentialError
		if !errors.As(err, &ce) {
			return ctrl.Result{}, err
		}
		obj.Status.ObservedGeneration = obj.Generation
		obj.Status.Targets = int32(len(obj.Spec.Services))
		r.setConditions(obj, &out, ce)
		logDecisions(logger, before, obj, &out)
		logger.Error(ce, "the API key cannot be used; nothing is written until its Secret changes", "reason", ce.reason, "cause", ce.cause)
		r.events.Eventf(obj, nil, corev1.EventTypeWarning, ce.reason, "ReadCredentials", "%s", ce.message)
		// The Secret watch brings the resource back once the Secret is fixed.
		return r.resync(), st.flush(ctx)
	}

	if err := r.leaveOldLoadBalancer(ctx, api, st, &out); err != nil {
		r.setConditions(obj, &out, nil)
		return ctrl.Result{}, errors.Join(err, st.flush(ctx))
	}
	obj.Status.LoadBalancerID = obj.Spec.LoadBalancerID

	lane, ok := r.lanes.tryAcquire(obj.Spec.LoadBalancerID, obj.Name, r.wakeFunc(obj.Name))
	if !ok {
		logger.V(1).Info("load balancer busy with another write; parked until it is done")
		return ctrl.Result{}, nil // enqueued again when the lane is free
	}
	defer lane.release()

	cluster, err := r.view(ctx, obj)
	if err != nil {
		return ctrl.Result{}, err
	}
	result := desired.Compute(&obj.Spec, cluster, desired.Options{RequireReady: r.opts.RequireReadyNodes})
	out.issues = result.Issues

	var jobs []syncJob
	inSpec := map[string]bool{}
	for _, bs := range result.BackendSets {
		inSpec[bs.Name] = true
		if _, ok := lost[bs.Name]; ok {
			continue
		}
		mode := plan.Apply
		if bs.Held != nil {
			mode = plan.Hold
			out.held = append(out.held, bs.Name)
		}
		jobs = append(jobs, syncJob{name: bs.Name, mode: mode, want: bs.Backends})
	}
	// Backend sets no longer in the spec: the target moved; remove what this resource put there.
	for _, rec := range obj.Status.BackendSets {
		if !inSpec[rec.Name] {
			jobs = append(jobs, syncJob{name: rec.Name, mode: plan.Remove})
		}
	}
	r.syncAll(ctx, api, st, &out, lane, jobs)

	obj.Status.ObservedGeneration = obj.Generation
	obj.Status.Targets = int32(len(obj.Spec.Services))
	r.setConditions(obj, &out, nil)
	logDecisions(logger, before, obj, &out)
	if err := st.flush(ctx); err != nil {
		return ctrl.Result{}, err
	}
	if out.err != nil {
		return ctrl.Result{}, out.err
	}
	return r.resync(), nil
}

// syncJob is one backend set to bring in line within a reconcile.
type syncJob struct {
	name       string
	mode       plan.Mode
	want       []desired.Backend
	protected  map[string]bool
	prefetched *oci.BackendSet
	skip       bool // its inputs could not be read
}

func (j *syncJob) input(obj *v1beta1.LBRegistrar, current []plan.Backend) plan.Input {
	return plan.Input{Mode: j.mode, Current: current, Owned: record(obj, j.name).Backends, Desired: j.want, Protected: j.protected}
}

// syncAll syncs backend sets of the load balancer whose lane is held, one
// write at a time, as OCI requires. Reads and the intent record are done
// first, for all of them at once, so the writes follow each other with
// nothing in between.
func (r *Reconciler) syncAll(ctx context.Context, api backendSetAPI, st *statusWriter, out *outcome, lane *hold, jobs []syncJob) {
	obj, lb := st.obj, lane.loadBalancerID
	logger := log.FromContext(ctx).WithValues("loadBalancer", lb)
	lane.step(PhaseReading, "", "")
	var wg sync.WaitGroup
	for i := range jobs {
		j := &jobs[i]
		var err error
		if j.protected, err = r.protected(ctx, obj, lb, j.name); err != nil {
			logger.Error(err, "listing the other claimants of the backend set", "backendSet", j.name)
			out.fail(j.name, err)
			j.skip = true
			continue
		}
		wg.Go(func() {
			// A failed read is retried by the sync itself.
			j.prefetched, _ = api.GetBackendSet(ctx, lb, j.name)
		})
	}
	wg.Wait()
	var changing []string
	for i := range jobs {
		j := &jobs[i]
		if j.prefetched == nil {
			continue
		}
		in := j.input(obj, j.prefetched.Backends)
		p := plan.Compute(in)
		if !p.Changed() {
			continue
		}
		changing = append(changing, j.name)
		if len(p.Added) > 0 {
			record(obj, j.name).Backends = plan.Intent(in.Owned, &p)
		}
	}
	if len(changing) > 0 && obj.DeletionTimestamp.IsZero() {
		setCondition(obj, v1beta1.ConditionReady, metav1.ConditionFalse, v1beta1.ReasonRegistering,
			"writing backend sets "+strings.Join(changing, ", "))
	}
	if err := st.flush(ctx); err != nil {
		logger.Error(err, "recording the intended ownership; nothing written", "backendSets", changing)
		out.fail("*", err)
		return
	}
	for i := range jobs {
		if !jobs[i].skip {
			r.syncOne(ctx, api, st, out, lane, &jobs[i])
		}
	}
}

// syncOne syncs one backend set and folds the result into the status and outcome.
func (r *Reconciler) syncOne(ctx context.Context, api backendSetAPI, st *statusWriter, out *outcome, lane *hold, j *syncJob) {
	obj, name, mode, lb := st.obj, j.name, j.mode, lane.loadBalancerID
	logger := log.FromContext(ctx).WithValues("loadBalancer", lb, "backendSet", name)
	res, err := syncBackendSet(ctx, api, r.opts.Backoff, syncRequest{
		LoadBalancerID: lb,
		Name:           name,
		Prefetched:     j.prefetched,
		WaitTimeout:    r.opts.WorkRequestTimeout,
		ShutdownWait:   r.opts.ShutdownWait,
		Lane:           lane,
		Input:          func(current []plan.Backend) plan.Input { return j.input(obj, current) },
		RecordIntent: func(owned []v1beta1.Backend) error {
			rec := record(obj, name)
			if slices.Equal(rec.Backends, owned) {
				return nil // recorded ahead, by syncAll
			}
			rec.Backends = owned
			return st.flush(ctx)
		},
	})
	if res.Written {
		record(obj, name).LastWorkRequest = res.WorkRequest
		if err == nil {
			r.events.Eventf(obj, nil, corev1.EventTypeNormal, "BackendSetUpdated", "UpdateBackendSet",
				"backend set %q: %d added, %d removed, %d updated (work request %s)",
				name, len(res.Plan.Added), len(res.Plan.Removed), len(res.Plan.Updated), res.WorkRequest.ID)
		}
	}
	switch {
	case err != nil:
		logger.Error(err, "backend set write failed")
		r.events.Eventf(obj, nil, corev1.EventTypeWarning, ReasonWriteFailed, "UpdateBackendSet", "backend set %q: %v", name, err)
		out.fail(name, err)
	case res.NotFound && (mode == plan.Remove || mode == plan.Drain):
		logger.V(1).Info("backend set or load balancer gone; nothing left to remove")
		dropRecord(obj, name)
	case res.NotFound:
		// The user must create it; the periodic resync retries, not the error backoff.
		missing := fmt.Sprintf("backend set %q not found in load balancer %s", name, lb)
		logger.Error(errors.New(missing), "registering nothing there until it exists")
		out.failures = append(out.failures, missing)
	case mode == plan.Remove && len(res.Plan.Owned) == 0:
		dropRecord(obj, name)
	default:
		record(obj, name).Backends = res.Plan.Owned
	}
	if rec := findRecord(obj, name); rec != nil {
		metrics.BackendsRegistered.WithLabelValues(obj.Name, name).Set(float64(len(rec.Backends)))
	} else {
		metrics.BackendsRegistered.DeleteLabelValues(obj.Name, name)
	}
}

func (o *outcome) fail(name string, err error) {
	o.failures = append(o.failures, fmt.Sprintf("backend set %q: %v", name, err))
	if o.err == nil {
		o.err = err
	}
}

func (r *Reconciler) finalize(ctx context.Context, obj *v1beta1.LBRegistrar) (ctrl.Result, error) {
	if !controllerutil.ContainsFinalizer(obj, Finalizer) {
		return ctrl.Result{}, nil
	}
	logger := log.FromContext(ctx).WithValues("loadBalancer", recordedLoadBalancer(obj))
	st := &statusWriter{client: r.client, reader: r.apiReader, obj: obj, base: obj.DeepCopy()}
	deleted := obj.DeletionTimestamp.Time
	giveUp := time.Now().After(deleted.Add(r.opts.CleanupTimeout))

	var out outcome
	if ownsBackends(obj) {
		api, err := r.api(ctx, obj)
		if err != nil {
			out.fail("*", err)
		} else {
			lane, err := r.lanes.acquire(ctx, recordedLoadBalancer(obj), obj.Name)
			if err != nil {
				return ctrl.Result{}, err
			}
			defer lane.release()
			drainUntil := deleted.Add(r.opts.DrainPeriod)
			mode := plan.Remove
			if time.Now().Before(drainUntil) {
				mode = plan.Drain
			}
			var jobs []syncJob
			var names []string
			for _, rec := range obj.Status.BackendSets {
				jobs = append(jobs, syncJob{name: rec.Name, mode: mode})
				names = append(names, rec.Name)
			}
			if mode == plan.Drain {
				logger.Info("deleted: draining this resource's backends before removing them", "backendSets", names, "until", drainUntil.UTC().Format(time.RFC3339))
			} else {
				logger.Info("deleted: removing this resource's backends", "backendSets", names)
			}
			r.syncAll(ctx, api, st, &out, lane, jobs)
			// What another resource now records, or OCI no longer holds,
			// left the record in the sync: only backends still owned wait.
			if out.err == nil && mode == plan.Drain && ownsBackends(obj) {
				setCondition(obj, v1beta1.ConditionReady, metav1.ConditionFalse, ReasonDeleting,
					fmt.Sprintf("draining owned backends until %s, then removing them", drainUntil.UTC().Format(time.RFC3339)))
				return ctrl.Result{RequeueAfter: time.Until(drainUntil) + 100*time.Millisecond}, st.flush(ctx)
			}
		}
	}
	if out.err != nil {
		if !giveUp {
			logger.Error(out.err, "cleanup failed; retrying until the cleanup timeout",
				"failures", out.failures, "giveUpAt", deleted.Add(r.opts.CleanupTimeout).UTC().Format(time.RFC3339))
			setCondition(obj, v1beta1.ConditionReady, metav1.ConditionFalse, ReasonDeleting, "cleanup failed, retrying: "+strings.Join(out.failures, "; "))
			if err := st.flush(ctx); err != nil {
				logger.Error(err, "recording cleanup failure")
			}
			var ce *credentialError
			if errors.As(out.err, &ce) {
				return ctrl.Result{RequeueAfter: min(30*time.Second, time.Until(deleted.Add(r.opts.CleanupTimeout)))}, nil
			}
			return ctrl.Result{}, out.err
		}
		logger.Error(out.err, "cleanup timeout passed; removing the finalizer anyway, backends may remain",
			"failures", out.failures, "cleanupTimeout", r.opts.CleanupTimeout)
		r.events.Eventf(obj, nil, corev1.EventTypeWarning, "CleanupAbandoned", "Deregister",
			"gave up deregistering after %s; backends may remain: %s", r.opts.CleanupTimeout, strings.Join(out.failures, "; "))
	}
	for _, rec := range obj.Status.BackendSets {
		metrics.BackendsRegistered.DeleteLabelValues(obj.Name, rec.Name)
	}
	logger.Info("deregistered; removing the finalizer")
	base := obj.DeepCopy()
	controllerutil.RemoveFinalizer(obj, Finalizer)
	return ctrl.Result{}, client.IgnoreNotFound(r.client.Patch(ctx, obj, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{})))
}

// ownsBackends reports whether obj's ownership record lists any backend.
func ownsBackends(obj *v1beta1.LBRegistrar) bool {
	return slices.ContainsFunc(obj.Status.BackendSets, func(bs v1beta1.BackendSetStatus) bool { return len(bs.Backends) > 0 })
}

// recordedLoadBalancer is the load balancer obj's ownership record refers
// to; records written before status.loadBalancerId existed refer to the spec's.
func recordedLoadBalancer(obj *v1beta1.LBRegistrar) string {
	if obj.Status.LoadBalancerID != "" {
		return obj.Status.LoadBalancerID
	}
	return obj.Spec.LoadBalancerID
}

// leaveOldLoadBalancer removes what obj registered in a load balancer its
// spec no longer names, before anything is registered in the new one.
func (r *Reconciler) leaveOldLoadBalancer(ctx context.Context, api backendSetAPI, st *statusWriter, out *outcome) error {
	obj := st.obj
	old := recordedLoadBalancer(obj)
	if old == obj.Spec.LoadBalancerID || len(obj.Status.BackendSets) == 0 {
		return nil
	}
	lane, err := r.lanes.acquire(ctx, old, obj.Name)
	if err != nil {
		return err
	}
	defer lane.release()
	log.FromContext(ctx).Info("removing this resource's backends from the load balancer its spec no longer names",
		"loadBalancer", old, "newLoadBalancer", obj.Spec.LoadBalancerID)
	var jobs []syncJob
	for _, rec := range obj.Status.BackendSets {
		jobs = append(jobs, syncJob{name: rec.Name, mode: plan.Remove})
	}
	r.syncAll(ctx, api, st, out, lane, jobs)
	if out.err != nil {
		return fmt.Errorf("removing the registrations in load balancer %s, which the spec no longer names: %w", old, out.err)
	}
	return nil
}

// api returns the OCI client for obj's credentials.
func (r *Reconciler) api(ctx context.Context, obj *v1beta1.LBRegistrar) (backendSetAPI, error) {
	creds, err := r.secrets.credentials(ctx, obj.Name, &obj.Spec.APIKey)
	if err != nil {
		return nil, err
	}
	api, err := r.clientFor(creds)
	if err != nil {
		if errors.Is(err, oci.ErrInvalidCredentials) {
			return nil, &credentialError{reason: reasonInvalidCredentials, message: "spec.apiKey: " + err.Error()}
		}
		return nil, err
	}
	return api, nil
}

// lostClaims returns the backend sets of obj that another live resource keeps.
func (r *Reconciler) lostClaims(ctx context.Context, obj *v1beta1.LBRegistrar) (map[string]string, error) {
	lost := map[string]string{}
	for i := range obj.Spec.Services {
		name := obj.Spec.Services[i].BackendSetName
		if _, seen := lost[name]; seen {
			continue
		}
		others, err := r.claimants(ctx, obj, obj.Spec.LoadBalancerID, name)
		if err != nil {
			return nil, err
		}
		live := []*v1beta1.LBRegistrar{obj}
		for j := range others {
			if others[j].DeletionTimestamp.IsZero() {
				live = append(live, &others[j])
			}
		}
		if holder := claimHolder(live); holder != obj {
			lost[name] = holder.Name
		}
	}
	return lost, nil
}

// claimHolder picks, among resources claiming one backend set, the one that
// keeps it. validation.Precedes decides between two; it need not be
// transitive (a replacement precedes what it replaces, an older resource
// precedes a newer one), so the candidates are taken oldest first and each
// replaces the current holder when it precedes it. Every resource that sees
// the same claimants picks the same holder, so exactly one writes.
func claimHolder(claimants []*v1beta1.LBRegistrar) *v1beta1.LBRegistrar {
	ordered := slices.Clone(claimants)
	slices.SortFunc(ordered, func(a, b *v1beta1.LBRegistrar) int {
		if c := a.CreationTimestamp.Compare(b.CreationTimestamp.Time); c != 0 {
			return c
		}
		return strings.Compare(a.Name, b.Name)
	})
	holder := ordered[0]
	for _, c := range ordered[1:] {
		if validation.Precedes(c, holder) {
			holder = c
		}
	}
	return holder
}

// protected returns the backends other live resources record in the same backend set.
func (r *Reconciler) protected(ctx context.Context, obj *v1beta1.LBRegistrar, lb, name string) (map[string]bool, error) {
	others, err := r.claimants(ctx, obj, lb, name)
	if err != nil {
		return nil, err
	}
	keys := map[string]bool{}
	for i := range others {
		if !others[i].DeletionTimestamp.IsZero() {
			continue
		}
		if rec := findRecord(&others[i], name); rec != nil {
			for _, b := range rec.Backends {
				keys[plan.Key(b.IP, b.Port)] = true
			}
		}
	}
	return keys, nil
}

// claimants lists the resources other than obj claiming (lb, name).
func (r *Reconciler) claimants(ctx context.Context, obj *v1beta1.LBRegistrar, lb, name string) ([]v1beta1.LBRegistrar, error) {
	found, err := claims.Of(ctx, r.client, lb, name)
	if err != nil {
		return nil, err
	}
	return slices.DeleteFunc(found, func(o v1beta1.LBRegistrar) bool { return o.Name == obj.Name }), nil
}

// view reads, from the cache, the part of the cluster obj's desired state depends on.
func (r *Reconciler) view(ctx context.Context, obj *v1beta1.LBRegistrar) (desired.Cluster, error) {
	var c desired.Cluster
	var nodes corev1.NodeList
	if err := r.client.List(ctx, &nodes, client.UnsafeDisableDeepCopy); err != nil {
		return c, err
	}
	c.Nodes = make([]*corev1.Node, len(nodes.Items))
	for i := range nodes.Items {
		c.Nodes[i] = &nodes.Items[i]
	}
	c.Services = map[types.NamespacedName]*corev1.Service{}
	c.EndpointSlices = map[types.NamespacedName][]*discoveryv1.EndpointSlice{}
	for i := range obj.Spec.Services {
		t := &obj.Spec.Services[i]
		if t.Name == "" {
			continue
		}
		key := types.NamespacedName{Namespace: t.Namespace, Name: t.Name}
		if _, done := c.Services[key]; done {
			continue
		}
		var svc corev1.Service
		if err := r.client.Get(ctx, key, &svc); err != nil {
			if client.IgnoreNotFound(err) != nil {
				return c, err
			}
			continue
		}
		c.Services[key] = &svc
		var slices discoveryv1.EndpointSliceList
		if err := r.client.List(ctx, &slices, client.InNamespace(key.Namespace),
			client.MatchingLabels{discoveryv1.LabelServiceName: key.Name}, client.UnsafeDisableDeepCopy); err != nil {
			return c, err
		}
		for j := range slices.Items {
			c.EndpointSlices[key] = append(c.EndpointSlices[key], &slices.Items[j])
		}
	}
	return c, nil
}

// resync schedules the periodic drift repair, jittered so resources spread out.
func (r *Reconciler) resync() ctrl.Result {
	if r.opts.Resync <= 0 {
		return ctrl.Result{}
	}
	return ctrl.Result{RequeueAfter: r.opts.Resync + time.Duration(rand.Int64N(int64(r.opts.Resync)/10+1))}
}

// setConditions derives Ready, Degraded and Conflict from one reconcile's outcome.
func (r *Reconciler) setConditions(obj *v1beta1.LBRegistrar, out *outcome, ce *credentialError) {
	if len(out.lost) > 0 {
		var msgs []string
		for _, name := range sortedKeys(out.lost) {
			msgs = append(msgs, fmt.Sprintf("backend set %q is kept by LBRegistrar %s; this resource registers nothing there until that one releases it", name, out.lost[name]))
		}
		setCondition(obj, v1beta1.ConditionConflict, metav1.ConditionTrue, ReasonClaimed, strings.Join(msgs, "; "))
	} else {
		setCondition(obj, v1beta1.ConditionConflict, metav1.ConditionFalse, ReasonAsExpected, "no other LBRegistrar claims these backend sets")
	}

	if len(out.issues) > 0 {
		var msgs []string
		for _, is := range out.issues {
			msgs = append(msgs, is.Message)
		}
		setCondition(obj, v1beta1.ConditionDegraded, metav1.ConditionTrue, out.issues[0].Reason, strings.Join(msgs, "; "))
	} else {
		setCondition(obj, v1beta1.ConditionDegraded, metav1.ConditionFalse, ReasonAsExpected, "every target resolved")
	}

	switch {
	case ce != nil:
		setCondition(obj, v1beta1.ConditionReady, metav1.ConditionFalse, ce.reason, ce.message)
	case len(out.failures) > 0:
		setCondition(obj, v1beta1.ConditionReady, metav1.ConditionFalse, ReasonWriteFailed, strings.Join(out.failures, "; "))
	case len(out.held) > 0:
		setCondition(obj, v1beta1.ConditionReady, metav1.ConditionFalse, ReasonHeld,
			fmt.Sprintf("backend sets %s keep their registered backends until the Degraded condition clears", strings.Join(out.held, ", ")))
	case len(out.lost) > 0:
		setCondition(obj, v1beta1.ConditionReady, metav1.ConditionFalse, ReasonClaimed, "see the Conflict condition")
	default:
		setCondition(obj, v1beta1.ConditionReady, metav1.ConditionTrue, v1beta1.ReasonRegistered, "every backend set holds the backends this resource should own")
	}
}

// logDecisions logs why backend sets were left alone: at Info when the
// condition that reports it changed in this reconcile, at V(1) when it only
// repeats, so a lasting conflict or hold is not logged on every reconcile.
func logDecisions(logger logr.Logger, before []metav1.Condition, obj *v1beta1.LBRegistrar, out *outcome) {
	at := func(typ string) logr.Logger {
		was, is := meta.FindStatusCondition(before, typ), meta.FindStatusCondition(obj.Status.Conditions, typ)
		if was == nil || is == nil || was.Status != is.Status || was.Reason != is.Reason || was.Message != is.Message {
			return logger
		}
		return logger.V(1)
	}
	for _, name := range sortedKeys(out.lost) {
		at(v1beta1.ConditionConflict).Info("backend set kept by another LBRegistrar; registering nothing there",
			"backendSet", name, "keptBy", out.lost[name])
	}
	for _, is := range out.issues {
		at(v1beta1.ConditionDegraded).Info("target not resolved", "reason", is.Reason, "detail", is.Message)
	}
	for _, name := range out.held {
		at(v1beta1.ConditionReady).Info("backend set held: its registered backends stay until the Degraded condition clears", "backendSet", name)
	}
}

func setCondition(obj *v1beta1.LBRegistrar, typ string, status metav1.ConditionStatus, reason, message string) {
	const maxMessage = 32768 // the schema's limit on condition messages
	if len(message) > maxMessage {
		message = message[:maxMessage-3] + "..."
	}
	meta.SetStatusCondition(&obj.Status.Conditions, metav1.Condition{
		Type: typ, Status: status, Reason: reason, Message: message, ObservedGeneration: obj.Generation,
	})
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// findRecord returns obj's ownership record for a backend set, or nil.
func findRecord(obj *v1beta1.LBRegistrar, name string) *v1beta1.BackendSetStatus {
	for i := range obj.Status.BackendSets {
		if obj.Status.BackendSets[i].Name == name {
			return &obj.Status.BackendSets[i]
		}
	}
	return nil
}

// record returns obj's ownership record for a backend set, adding an empty one if needed.
func record(obj *v1beta1.LBRegistrar, name string) *v1beta1.BackendSetStatus {
	if rec := findRecord(obj, name); rec != nil {
		return rec
	}
	obj.Status.BackendSets = append(obj.Status.BackendSets, v1beta1.BackendSetStatus{Name: name})
	slices.SortFunc(obj.Status.BackendSets, func(a, b v1beta1.BackendSetStatus) int { return strings.Compare(a.Name, b.Name) })
	return findRecord(obj, name)
}

func dropRecord(obj *v1beta1.LBRegistrar, name string) {
	obj.Status.BackendSets = slices.DeleteFunc(obj.Status.BackendSets, func(s v1beta1.BackendSetStatus) bool { return s.Name == name })
}

// statusWriteTimeout bounds one status write, also after shutdown began.
const statusWriteTimeout = 10 * time.Second

// statusWriter patches the status subresource with what changed since the
// last patch. Patches carry the resourceVersion they were computed from, so a
// writer with a stale view (a leader that lost its lease, a reconcile that
// raced another) cannot overwrite a newer ownership record.
type statusWriter struct {
	client client.Client
	// reader reads past the cache, which a leader shutting down no longer updates.
	reader client.Reader
	obj    *v1beta1.LBRegistrar
	base   *v1beta1.LBRegistrar
}

func (s *statusWriter) flush(ctx context.Context) error {
	if data, err := client.MergeFrom(s.base).Data(s.obj); err == nil && string(data) == "{}" {
		return nil
	}
	// A write already accepted by OCI must still be recorded during
	// shutdown, within what the shutdown budget keeps for it.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), statusWriteTimeout)
	defer cancel()
	err := s.client.Status().Patch(ctx, s.obj, client.MergeFromWithOptions(s.base, client.MergeFromWithOptimisticLock{}))
	if apierrors.IsConflict(err) {
		// The conflict makes the reconcile run again from a fresh read.
		return errors.Join(err, s.rebase(ctx))
	}
	if err != nil {
		return err
	}
	s.base = s.obj.DeepCopy()
	return nil
}

// rebase records, on top of the status someone else wrote meanwhile, the
// work requests this writer saw through, which only it knows (a leader
// finishing a write while it shuts down). The newer status keeps its
// ownership records and everything else; the next reconcile starts from it.
func (s *statusWriter) rebase(ctx context.Context) error {
	seen := map[string]*v1beta1.WorkRequest{}
	for _, bs := range s.obj.Status.BackendSets {
		if bs.LastWorkRequest != nil && !equality.Semantic.DeepEqual(bs.LastWorkRequest, lastWorkRequest(s.base, bs.Name)) {
			seen[bs.Name] = bs.LastWorkRequest
		}
	}
	if len(seen) == 0 {
		return nil
	}
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur := &v1beta1.LBRegistrar{}
		if err := s.reader.Get(ctx, client.ObjectKeyFromObject(s.obj), cur); err != nil {
			return err
		}
		base := cur.DeepCopy()
		if !mergeWorkRequests(cur, seen) {
			return nil
		}
		return s.client.Status().Patch(ctx, cur, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{}))
	})
}

// mergeWorkRequests sets the last work request of obj's records to the ones
// seen, unless a record holds a later one. A backend set obj has no record
// for gets none: whoever dropped it owns nothing there. It reports whether
// anything changed.
func mergeWorkRequests(obj *v1beta1.LBRegistrar, seen map[string]*v1beta1.WorkRequest) bool {
	changed := false
	for name, wr := range seen {
		rec := findRecord(obj, name)
		if rec == nil || equality.Semantic.DeepEqual(rec.LastWorkRequest, wr) ||
			(rec.LastWorkRequest != nil && rec.LastWorkRequest.ID != wr.ID && rec.LastWorkRequest.Time.After(wr.Time.Time)) {
			continue
		}
		rec.LastWorkRequest = wr.DeepCopy()
		changed = true
	}
	return changed
}

func lastWorkRequest(obj *v1beta1.LBRegistrar, backendSet string) *v1beta1.WorkRequest {
	if rec := findRecord(obj, backendSet); rec != nil {
		return rec.LastWorkRequest
	}
	return nil
}
