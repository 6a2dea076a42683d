package status

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/peppy-ratio/lbregistrar/api/v1beta1"
	"github.com/peppy-ratio/lbregistrar/reconciler/desired"
)

// Outcome gathers what one reconcile found, for the conditions.
type Outcome struct {
	Issues  []desired.Issue
	Held    []string
	Pending []string          // writes DryRun held back
	Lost    map[string]string // backend set -> resource that keeps it
	// Unusable says why the resource's credentials cannot be used.
	Unusable *Unusable
	Failures []string
	// Unhealthy says, per backend set, which own backends OCI reports
	// unhealthy; it makes Degraded True but fails nothing.
	Unhealthy []string
	// RevisitAt is when the resource must be reconciled again before its
	// resync: the first drain of a departed node is over, or additions OCI
	// refused are due to be tried again.
	RevisitAt time.Time
	Err       error
	// refused: OCI refused a write for what it holds (Refused), which only
	// a change of the spec or the cluster can mend.
	refused bool
}

// Unusable is a problem with a resource's credentials that its user can
// fix: the Ready condition's reason and message, which never hold key
// material. Retried: the controller tries again by itself (a sign-in under
// way, an API error); otherwise a person must act.
type Unusable struct {
	Reason, Message string
	Retried         bool
}

// Refused records that OCI refused adding n backends to a backend set, and
// when that is tried again, and returns what it records.
func (o *Outcome) Refused(name string, n int, err error, retryAt time.Time) string {
	msg := fmt.Sprintf("backend set %q: OCI refused adding %d backends: %v; the rest is written without them, and they are tried again at %s, or at once when the spec or the wanted nodes change",
		name, n, err, retryAt.UTC().Format(time.RFC3339))
	o.Failures = append(o.Failures, msg)
	o.refused = true
	o.Revisit(retryAt)
	return msg
}

// Revisit asks for the resource to be reconciled again at t, or earlier.
func (o *Outcome) Revisit(t time.Time) {
	if !t.IsZero() && (o.RevisitAt.IsZero() || t.Before(o.RevisitAt)) {
		o.RevisitAt = t
	}
}

// Fail records that a backend set ("*" for all) could not be brought in line.
func (o *Outcome) Fail(name string, err error) {
	o.Failures = append(o.Failures, fmt.Sprintf("backend set %q: %v", name, err))
	if o.Err == nil {
		o.Err = err
	}
}

// SetConditions derives Ready, Degraded and Conflict from one reconcile's outcome.
func SetConditions(obj *v1beta1.LBRegistrar, out *Outcome) {
	if len(out.Lost) > 0 {
		var msgs []string
		for _, name := range sortedKeys(out.Lost) {
			msgs = append(msgs, fmt.Sprintf("backend set %q is kept by LBRegistrar %s; this resource registers nothing there until that one releases it", name, out.Lost[name]))
		}
		SetCondition(obj, v1beta1.ConditionConflict, metav1.ConditionTrue, v1beta1.ReasonClaimed, strings.Join(msgs, "; "))
	} else {
		SetCondition(obj, v1beta1.ConditionConflict, metav1.ConditionFalse, v1beta1.ReasonAsExpected, "no other LBRegistrar claims these backend sets")
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
		SetCondition(obj, v1beta1.ConditionDegraded, metav1.ConditionTrue, reason, strings.Join(append(msgs, out.Unhealthy...), "; "))
	} else {
		SetCondition(obj, v1beta1.ConditionDegraded, metav1.ConditionFalse, v1beta1.ReasonAsExpected, "every target resolved")
	}

	switch {
	case out.Unusable != nil:
		SetCondition(obj, v1beta1.ConditionReady, metav1.ConditionFalse, out.Unusable.Reason, out.Unusable.Message)
		if !out.Unusable.Retried {
			stalled(obj, out.Unusable.Reason, out.Unusable.Message)
		}
	case len(out.Failures) > 0:
		SetCondition(obj, v1beta1.ConditionReady, metav1.ConditionFalse, v1beta1.ReasonWriteFailed, strings.Join(out.Failures, "; "))
		if out.refused {
			stalled(obj, v1beta1.ReasonWriteFailed, strings.Join(out.Failures, "; "))
		}
	case len(out.Pending) > 0:
		SetCondition(obj, v1beta1.ConditionReady, metav1.ConditionFalse, v1beta1.ReasonDryRun,
			"dry run, nothing written; pending: "+strings.Join(out.Pending, "; "))
	case len(out.Held) > 0:
		SetCondition(obj, v1beta1.ConditionReady, metav1.ConditionFalse, v1beta1.ReasonHeld,
			fmt.Sprintf("backend sets %s keep their registered backends until the Degraded condition clears", strings.Join(out.Held, ", ")))
	case len(out.Lost) > 0:
		SetCondition(obj, v1beta1.ConditionReady, metav1.ConditionFalse, v1beta1.ReasonClaimed, "see the Conflict condition")
		stalled(obj, v1beta1.ReasonClaimed, meta.FindStatusCondition(obj.Status.Conditions, v1beta1.ConditionConflict).Message)
	default:
		SetCondition(obj, v1beta1.ConditionReady, metav1.ConditionTrue, v1beta1.ReasonRegistered, "every backend set holds the backends this resource should own")
	}
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
		at(v1beta1.ConditionConflict).Info("backend set kept by another LBRegistrar; registering nothing there",
			"backendSet", name, "keptBy", out.Lost[name])
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

// SetCondition sets one condition of obj, its message cut to what the
// schema allows. Setting Ready sets Reconciling and Stalled with it: the
// controller is still at work unless Ready is True or the resource is
// suspended; SetConditions then marks what needs a person as stalled.
func SetCondition(obj *v1beta1.LBRegistrar, typ string, status metav1.ConditionStatus, reason, message string) {
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
	working := metav1.ConditionTrue
	if status == metav1.ConditionTrue || reason == v1beta1.ReasonSuspended {
		working = metav1.ConditionFalse
	}
	SetCondition(obj, v1beta1.ConditionReconciling, working, reason, message)
	SetCondition(obj, v1beta1.ConditionStalled, metav1.ConditionFalse, reason, message)
}

// SetSuspended sets obj's Ready for spec.suspend: nothing is written to
// OCI, and the registered backends stay as they are.
func SetSuspended(obj *v1beta1.LBRegistrar) {
	SetCondition(obj, v1beta1.ConditionReady, metav1.ConditionFalse, v1beta1.ReasonSuspended,
		"spec.suspend is true: nothing is written to OCI, and the registered backends stay as they are")
}

// stalled marks obj, whose Ready is set, as needing a person: nothing the
// controller retries will move it on.
func stalled(obj *v1beta1.LBRegistrar, reason, message string) {
	SetCondition(obj, v1beta1.ConditionReconciling, metav1.ConditionFalse, reason, message)
	SetCondition(obj, v1beta1.ConditionStalled, metav1.ConditionTrue, reason, message)
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
