// Package readiness decides lbregistrar's readiness gate of one pod
// (v1beta1.ReadinessGate), as a pure function of the targets that gate it
// (desired.Gating) and what the last reconcile of each of their resources
// found (Record: the desired state's desired.Stand for the pod, the
// backend sets as OCI has them, and what keeps the controller from
// writing). When a gate turns True is this file and desired/stand.go.
package readiness

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/peppy-ratio/lbregistrar/api/v1beta1"
	"github.com/peppy-ratio/lbregistrar/reconciler/desired"
)

// Why a gate waits: the label of the waiting pods' metric.
const (
	// WaitRegistering: the pod's backend is not written yet.
	WaitRegistering = "registering"
	// WaitHealth: it is written; OCI's health check has not passed yet.
	WaitHealth = "health"
	// WaitBlocked: the controller cannot write it; a person must act.
	WaitBlocked = "blocked"
)

// Verdict is the gate's condition, and why.
type Verdict struct {
	Ready   bool
	Reason  string // the condition's reason (v1beta1.ReasonLoadBalancer...)
	Message string
	// Wait is why a gate not Ready waits (WaitRegistering, WaitHealth,
	// WaitBlocked).
	Wait string
	// RecheckAt, for a wait on OCI's health, is when a health read may
	// find it changed: OCI's next check of the backend, or the end of the
	// settle time of a pod at a gone pod's address. Zero when unknown.
	RecheckAt time.Time
}

// Decide is the gate of the pod uid, which gates gate: True once, for each
// gate, the backend set has a backend standing for the pod serving and,
// where health is read and awaited, OCI reports it OK; or once no gate
// has a backend to wait for (its resource released the gates, or writes
// no backend for the pod). Otherwise False: blocked, naming the first gate
// the controller cannot write for, whatever else waits, since a person
// must act; or waiting, naming the first gate that waits and why. get is
// the last Record of each resource.
func Decide(gates []desired.Gate, uid types.UID, get func(resource string) (Record, bool), health bool) Verdict {
	var met, skipped, released []string
	var waiting *Verdict
	for _, g := range gates {
		j := judge(g, uid, get, health)
		switch {
		case j.verdict != nil && j.verdict.Wait == WaitBlocked:
			return *j.verdict
		case j.verdict != nil:
			if waiting == nil {
				waiting = j.verdict
			}
		case j.released:
			released = append(released, g.LBRegistrar)
		case j.skipped != "":
			skipped = append(skipped, j.skipped)
		default:
			met = append(met, j.met)
		}
	}
	switch {
	case waiting != nil:
		return *waiting
	case len(met) > 0:
		return Verdict{Ready: true, Reason: v1beta1.ReasonLoadBalancerReady, Message: "the load balancer has it: " + strings.Join(met, ", ") + also(skipped, released)}
	case len(released) > 0:
		return Verdict{Ready: true, Reason: v1beta1.ReasonGatesReleased, Message: fmt.Sprintf("released by annotation %s on LBRegistrar %s", v1beta1.ReleaseGatesAnnotation, strings.Join(slices.Compact(released), ", ")) + also(skipped, nil)}
	case len(skipped) > 0:
		return Verdict{Ready: true, Reason: v1beta1.ReasonNotRegistered, Message: strings.Join(skipped, "; ")}
	}
	return Verdict{Ready: true, Reason: v1beta1.ReasonNotRegistered, Message: "no LBRegistrar registers this pod"}
}

// judgement is what one gate says of the pod: a verdict not Ready, or
// released, or skipped (why), or met (by which backend).
type judgement struct {
	verdict  *Verdict
	released bool
	skipped  string
	met      string
}

func judge(g desired.Gate, uid types.UID, get func(resource string) (Record, bool), health bool) judgement {
	where := fmt.Sprintf("backend set %q of %s (LBRegistrar %s)", g.BackendSet, g.LoadBalancerID, g.LBRegistrar)
	if g.Released {
		return judgement{released: true}
	}
	if g.Suspended {
		return blocked(fmt.Sprintf("LBRegistrar %s is suspended (spec.suspend) and writes nothing, so %s cannot take the pod; resume it", g.LBRegistrar, where))
	}
	rec, ok := get(g.LBRegistrar)
	switch {
	case !ok:
		return pending(WaitRegistering, fmt.Sprintf("LBRegistrar %s has not been reconciled yet", g.LBRegistrar))
	case rec.Blocked != "":
		return blocked(fmt.Sprintf("LBRegistrar %s cannot write %s: %s", g.LBRegistrar, where, rec.Blocked))
	case rec.Generation != g.Generation:
		return pending(WaitRegistering, fmt.Sprintf("LBRegistrar %s changed (generation %d); waiting for its reconcile", g.LBRegistrar, g.Generation))
	}
	set := rec.Sets[g.BackendSet]
	stand := standOf(set, uid, g.Target)
	switch {
	case stand != nil && stand.Skip != "":
		return judgement{skipped: fmt.Sprintf("%s writes no backend for it: %s", where, stand.Skip)}
	case set == nil:
		return pending(WaitRegistering, where+" has not been written since the pod's endpoint appeared")
	case stand == nil && set.Blocked != "":
		return blocked(where + ": " + set.Blocked)
	case stand == nil:
		return pending(WaitRegistering, fmt.Sprintf("the pod is not in the EndpointSlices of the Service services[%d] of LBRegistrar %s names, as its last reconcile read them", g.Target, g.LBRegistrar))
	}
	backend := ""
	if i := slices.IndexFunc(stand.Backends, func(b string) bool { return set.Serving[b] }); i >= 0 {
		backend = stand.Backends[i]
	}
	switch {
	case backend == "" && set.Blocked != "":
		return blocked(fmt.Sprintf("%s does not have %s: %s", where, strings.Join(stand.Backends, " or "), set.Blocked))
	case backend == "":
		return pending(WaitRegistering, fmt.Sprintf("%s does not have %s serving yet", where, strings.Join(stand.Backends, " or ")))
	case !stand.Healthy || !health:
	case set.Reused[uid] && set.ReadAt.Before(set.Since[uid].Add(set.Schedule.Settle())):
		return healthPending(set.Since[uid].Add(set.Schedule.Settle()), fmt.Sprintf("%s has %s, which stood for another pod before this one; OCI's health of it is that pod's until its checks have found this one (%s after it appeared)", where, backend, set.Schedule.Settle()))
	case set.Health[backend] == "":
		return healthPending(nextCheck(set, uid), fmt.Sprintf("%s has %s; its health has not been read yet", where, backend))
	case set.Health[backend] != "OK":
		return healthPending(nextCheck(set, uid), fmt.Sprintf("%s has %s; OCI reports it %s", where, backend, set.Health[backend]))
	}
	return judgement{met: backend + " in " + g.BackendSet}
}

// nextCheck is when a health read can first find what OCI's next check
// of the pod uid's backend in set found. The checks come every interval,
// each over within timeout; counted from when the pod first stood there
// (when its backend was written, or found), they are over at since +
// timeout + k x interval, and the read goes at the first of those after
// the last read: one read an interval, as reading an interval after the
// last would be, but placed just after a check ends rather than anywhere
// in the interval, where a checker that checks a backend as soon as it
// has it (as the emulator's does) puts its checks. OCI documents no phase;
// in the worst case the read comes an interval late, as before.
func nextCheck(set *Set, uid types.UID) time.Time {
	since := set.Since[uid]
	if since.IsZero() { // not stamped: count from the last read
		since = set.ReadAt
	}
	due, interval := since.Add(set.Schedule.Timeout), set.Schedule.Interval
	if interval > 0 && !set.ReadAt.Before(due) {
		due = due.Add((set.ReadAt.Sub(due)/interval + 1) * interval)
	}
	return due
}

func healthPending(recheckAt time.Time, message string) judgement {
	j := pending(WaitHealth, message)
	j.verdict.RecheckAt = recheckAt
	return j
}

// Unconditional reports whether the verdict on a pod gated by gates does
// not depend on its registration: no gate, or every one released.
func Unconditional(gates []desired.Gate) bool {
	return !slices.ContainsFunc(gates, func(g desired.Gate) bool { return !g.Released })
}

// also names the gates that were not waited for, after those that were.
func also(skipped, released []string) string {
	out := ""
	if len(skipped) > 0 {
		out += "; not waited for: " + strings.Join(skipped, "; ")
	}
	if len(released) > 0 {
		out += "; released by LBRegistrar " + strings.Join(slices.Compact(released), ", ")
	}
	return out
}

func pending(wait, message string) judgement {
	return judgement{verdict: &Verdict{Reason: v1beta1.ReasonLoadBalancerPending, Message: message, Wait: wait}}
}

func blocked(message string) judgement {
	return judgement{verdict: &Verdict{Reason: v1beta1.ReasonLoadBalancerBlocked, Wait: WaitBlocked,
		Message: message + fmt.Sprintf("; the pod waits until this is fixed, or until the LBRegistrar is annotated %s=true", v1beta1.ReleaseGatesAnnotation)}}
}

// standOf is the stand of pod uid under target (its index) in set, nil when the set's
// desired state did not list the pod.
func standOf(set *Set, uid types.UID, target int) *desired.Stand {
	if set == nil {
		return nil
	}
	for k := range set.Stands[uid] {
		if st := &set.Stands[uid][k]; st.Target == target {
			return st
		}
	}
	return nil
}
