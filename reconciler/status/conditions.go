package status

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/peppy-ratio/lbregistrar/api/v1beta1"
	"github.com/peppy-ratio/lbregistrar/reconciler/desired"
	"github.com/peppy-ratio/lbregistrar/reconciler/oci"
)

// Outcome gathers what one reconcile found, for the conditions.
type Outcome struct {
	Issues  []desired.Issue
	Held    []string
	Pending []string          // writes DryRun did not make
	Lost    map[string]string // backend set -> its holder
	// Unusable says why the resource's credentials cannot be used.
	Unusable *Failure
	// Phase is where the flow has the resource on its way, when that keeps
	// it from Ready: its writes under way (Registering), its backends
	// draining on deletion (Deleting) or in the load balancer it leaves
	// (Moving). A person's fault still comes first.
	Phase    *Failure
	Failures []Failure
	// Unhealthy says, per backend set, which own backends OCI reports
	// unhealthy; it makes Degraded True but fails nothing.
	Unhealthy []string
	// RevisitAt is when the resource must be reconciled again before its
	// resync: the first drain of a departed node is over, or additions OCI
	// refused are due to be tried again.
	RevisitAt time.Time
	Err       error
}

// Failure is one thing that keeps the resource from Ready: a reason of
// States and a message that names what to do, never key material.
type Failure struct {
	Reason, Message string
}

// Messages is every failure's message, in one line.
func (o *Outcome) Messages() string {
	msgs := make([]string, len(o.Failures))
	for i, f := range o.Failures {
		msgs[i] = f.Message
	}
	return strings.Join(msgs, "; ")
}

// Refused records that OCI refused adding n backends to a backend set, and
// when that is tried again, and returns what it records.
func (o *Outcome) Refused(name string, n int, err error, retryAt time.Time) string {
	msg := fmt.Sprintf("backend set %q: OCI refused adding %d backends: %v; the rest is written without them, and they are tried again at %s, or at once when the spec or the wanted nodes change",
		name, n, err, retryAt.UTC().Format(time.RFC3339))
	o.Failures = append(o.Failures, Failure{v1beta1.ReasonWriteRefused, msg})
	o.Revisit(retryAt)
	return msg
}

// Revisit asks for the resource to be reconciled again at t, or earlier.
func (o *Outcome) Revisit(t time.Time) {
	if !t.IsZero() && (o.RevisitAt.IsZero() || t.Before(o.RevisitAt)) {
		o.RevisitAt = t
	}
}

// Fail records that a backend set ("*" for all) could not be brought in
// line, with the reason OCI's answer stands for.
func (o *Outcome) Fail(name string, err error) {
	o.fail(failureReason(err), fmt.Sprintf("backend set %q: %v", name, err), err)
}

// Missing records that OCI answered 404 for a backend set to register in:
// message says which of the two fixes applies (decide.MissingBackendSet).
func (o *Outcome) Missing(message string, err error) {
	reason := v1beta1.ReasonBackendSetNotFound
	if oci.IsLoadBalancerMissing(err) {
		reason = v1beta1.ReasonNotAuthorizedOrNotFound
	}
	o.fail(reason, message, err)
}

func (o *Outcome) fail(reason, message string, err error) {
	o.Failures = append(o.Failures, Failure{reason, message})
	if o.Err == nil {
		o.Err = err
	}
}

// failureReason is the reason of a write or read that failed with err:
// refused for what it contains, refused for who sent it, or a fault the
// controller retries.
func failureReason(err error) string {
	switch {
	case oci.IsRefused(err):
		return v1beta1.ReasonWriteRefused
	case oci.IsNotAuthorized(err):
		return v1beta1.ReasonNotAuthorized
	}
	return v1beta1.ReasonWriteFailed
}

// SetConditions derives Ready, Reconciling, Stalled, Degraded and Conflict
// from one reconcile's outcome: the one place they are decided (States
// gives each reason its state), on the way out and for the intent record.
func SetConditions(obj *v1beta1.LBRegistrar, out *Outcome) {
	if len(out.Lost) > 0 {
		setCondition(obj, v1beta1.ConditionConflict, metav1.ConditionTrue, v1beta1.ReasonClaimed, lostMessage(out.Lost))
	} else {
		setCondition(obj, v1beta1.ConditionConflict, metav1.ConditionFalse, v1beta1.ReasonAsExpected, "no other LBRegistrar claims these backend sets")
	}

	if len(out.Issues) > 0 || len(out.Unhealthy) > 0 {
		reason := v1beta1.ReasonBackendsUnhealthy
		if len(out.Issues) > 0 {
			reason = out.Issues[0].Reason
		}
		var msgs []string
		for _, is := range out.Issues {
			msgs = append(msgs, is.Message)
		}
		setCondition(obj, v1beta1.ConditionDegraded, metav1.ConditionTrue, reason, strings.Join(append(msgs, out.Unhealthy...), "; "))
	} else {
		setCondition(obj, v1beta1.ConditionDegraded, metav1.ConditionFalse, v1beta1.ReasonAsExpected, "every target resolved")
	}
	setReady(obj, out.blockers())
}

// blockers is what keeps the resource from Ready.
func (o *Outcome) blockers() []Failure {
	var bs []Failure
	if o.Unusable != nil {
		bs = append(bs, *o.Unusable)
	}
	if o.Phase != nil {
		bs = append(bs, *o.Phase)
	}
	bs = append(bs, o.Failures...)
	if len(o.Pending) > 0 {
		bs = append(bs, Failure{v1beta1.ReasonDryRun, "dry run, nothing written; pending: " + strings.Join(o.Pending, "; ")})
	}
	if len(o.Held) > 0 {
		bs = append(bs, Failure{v1beta1.ReasonHeld, fmt.Sprintf("backend sets %s keep their registered backends until the Degraded condition clears", strings.Join(o.Held, ", "))})
	}
	if len(o.Lost) > 0 {
		bs = append(bs, Failure{v1beta1.ReasonClaimed, lostMessage(o.Lost)})
	}
	return bs
}

// setReady sets Ready from what keeps the resource from it, and with it
// Reconciling and Stalled (setCondition): a person's fault is the reason
// whatever else is wrong, and the message lists everything.
func setReady(obj *v1beta1.LBRegistrar, blockers []Failure) {
	if len(blockers) == 0 {
		setCondition(obj, v1beta1.ConditionReady, metav1.ConditionTrue, v1beta1.ReasonRegistered, "every backend set has the backends this resource should own")
		return
	}
	slices.SortStableFunc(blockers, func(a, b Failure) int {
		return cmp.Compare(rank(a.Reason), rank(b.Reason))
	})
	msgs := make([]string, len(blockers))
	for i, b := range blockers {
		msgs[i] = b.Message
	}
	setCondition(obj, v1beta1.ConditionReady, metav1.ConditionFalse, blockers[0].Reason, strings.Join(msgs, "; "))
}

// rank orders blockers: what needs a person first.
func rank(reason string) int {
	if StateOf(reason) == Stalled {
		return 0
	}
	return 1
}

func lostMessage(lost map[string]string) string {
	var msgs []string
	for _, name := range sortedKeys(lost) {
		msgs = append(msgs, fmt.Sprintf("backend set %q belongs to LBRegistrar %s; this resource registers nothing there until that one releases it", name, lost[name]))
	}
	return strings.Join(msgs, "; ")
}

// LogDecisions logs why backend sets were left alone: at Info when the
// condition that reports it changed in this reconcile, at V(1) when it only
// repeats, so a lasting conflict or hold is not logged on every reconcile.
func LogDecisions(logger logr.Logger, before []metav1.Condition, obj *v1beta1.LBRegistrar, out *Outcome) {
	at := func(typ string) logr.Logger {
		was, is := meta.FindStatusCondition(before, typ), meta.FindStatusCondition(obj.Status.Conditions, typ)
		if was == nil || is == nil || was.Status != is.Status || was.Reason != is.Reason || was.Message != is.Message {
			return logger
		}
		return logger.V(1)
	}
	for _, name := range sortedKeys(out.Lost) {
		at(v1beta1.ConditionConflict).Info("backend set belongs to another LBRegistrar; registering nothing there",
			"backendSet", name, "holder", out.Lost[name])
	}
	for _, is := range out.Issues {
		at(v1beta1.ConditionDegraded).Info("target not resolved", "reason", is.Reason, "detail", is.Message)
	}
	for _, msg := range out.Unhealthy {
		at(v1beta1.ConditionDegraded).Info("OCI reports own backends unhealthy", "reason", v1beta1.ReasonBackendsUnhealthy, "detail", msg)
	}
	for _, name := range out.Held {
		at(v1beta1.ConditionReady).Info("backend set held: its registered backends stay until the Degraded condition clears", "backendSet", name)
	}
}

// setCondition sets one condition of obj, its message cut to what the
// schema allows. Setting Ready sets Reconciling and Stalled with it, from
// the state of its reason (States): Stalled when a person must act,
// Reconciling while the controller moves on by itself, neither once Ready
// is True.
func setCondition(obj *v1beta1.LBRegistrar, typ string, status metav1.ConditionStatus, reason, message string) {
	const maxMessage = 32768 // the schema's limit on condition messages
	if len(message) > maxMessage {
		message = message[:maxMessage-3] + "..."
	}
	meta.SetStatusCondition(&obj.Status.Conditions, metav1.Condition{
		Type: typ, Status: status, Reason: reason, Message: message, ObservedGeneration: obj.Generation,
	})
	if typ != v1beta1.ConditionReady {
		return
	}
	working, stalled := metav1.ConditionFalse, metav1.ConditionFalse
	switch {
	case status == metav1.ConditionTrue:
	case StateOf(reason) == Stalled:
		stalled = metav1.ConditionTrue
	default:
		working = metav1.ConditionTrue
	}
	setCondition(obj, v1beta1.ConditionReconciling, working, reason, message)
	setCondition(obj, v1beta1.ConditionStalled, stalled, reason, message)
	if !obj.Spec.Suspend {
		setCondition(obj, v1beta1.ConditionSuspended, metav1.ConditionFalse, v1beta1.ReasonAsExpected, "spec.suspend is false")
	}
}

// SetSuspended records that obj's spec.suspend is true: nothing is written
// to OCI, and the registered backends stay as they are. Ready, Stalled,
// Degraded and Conflict keep what the last reconcile found, as Flux's
// suspended objects (kustomize-controller #183: a suspended resource is
// not marked not ready) and Crossplane's paused resources (Synced False,
// ReconcilePaused; Ready untouched) keep theirs; nothing is under way, so
// Reconciling is False. A GitOps tool's verdict on the resource is the
// one it had before the pause.
func SetSuspended(obj *v1beta1.LBRegistrar) {
	const message = "spec.suspend is true: nothing is written to OCI, and the registered backends stay as they are"
	setCondition(obj, v1beta1.ConditionSuspended, metav1.ConditionTrue, v1beta1.ReasonSuspended, message)
	setCondition(obj, v1beta1.ConditionReconciling, metav1.ConditionFalse, v1beta1.ReasonSuspended, message)
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
