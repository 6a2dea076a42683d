package ociemu

import (
	"context"
	"net/http"
	"runtime/pprof"
	"strings"
	"time"

	"github.com/oracle/oci-go-sdk/v65/common"
	"github.com/oracle/oci-go-sdk/v65/loadbalancer"
	"github.com/oracle/oci-go-sdk/v65/networkloadbalancer"
)

// Work request states, shared by both APIs.
const (
	StateAccepted   = "ACCEPTED"
	StateInProgress = "IN_PROGRESS"
	StateSucceeded  = "SUCCEEDED"
	StateFailed     = "FAILED"
)

// workRequest is an asynchronous write. Its change is applied to the load
// balancer only when it succeeds, so reads return the old configuration
// until then, as they do in OCI.
type workRequest struct {
	id         string
	balancer   *balancer
	operation  string // SDK operation name, e.g. UpdateBackendSet
	backendSet string
	status     string
	accepted   time.Time
	started    time.Time
	finished   time.Time
	apply      func()
	failure    *failure    // end FAILED for this, without applying
	stuckBy    *faultEntry // kept IN_PROGRESS while this fault is active
	stuck      bool        // due to finish, but stuckBy kept it in flight
}

// failure is why a work request failed: a code and a message, as
// errorDetails (classic) and ListWorkRequestErrors (NLB) give them.
type failure struct {
	code, message string
}

// forClassic and forNetwork fill in what a failure left unsaid: by default
// a work request fails as a service error, which a retry may get past.
func (f failure) forClassic() failure {
	if f.code == "" {
		f.code = string(loadbalancer.WorkRequestErrorErrorCodeInternalError)
	}
	if f.message == "" {
		f.message = "The work request failed (injected fault)."
	}
	return f
}

func (f failure) forNetwork() failure {
	if f.code == "" {
		f.code = "InternalServerError"
	}
	return f.forClassic()
}

func (w *workRequest) inFlight() bool {
	return w.status == StateAccepted || w.status == StateInProgress
}

// write is a validated change waiting for a work request.
type write struct {
	operation  string
	backendSet string
	apply      func()
}

// submit runs under e.mu: it refuses a write while another work request on
// the same load balancer is in flight, otherwise creates the work request
// and schedules it.
func (e *Emulator) submit(rc *requestContext, b *balancer, wr write) (*workRequest, error) {
	if b.network != nil {
		switch b.network.LifecycleState {
		case networkloadbalancer.LifecycleStateFailed, networkloadbalancer.LifecycleStateDeleting:
			return nil, e.conflictError(b) // no write leaves these states
		}
	}
	if b.classic != nil {
		// SDK LoadBalancerLifecycleStateEnum has FAILED and DELETING too;
		// what a write then gets is not documented: refused as for an NLB.
		switch s := b.classic.LifecycleState; s {
		case loadbalancer.LoadBalancerLifecycleStateFailed, loadbalancer.LoadBalancerLifecycleStateDeleting:
			return nil, &apiError{status: http.StatusConflict, code: e.opts.ClassicConflictCode,
				message: "Load balancer " + b.id() + " is " + string(s) + " and takes no changes"}
		}
	}
	for _, other := range e.workOrder {
		if other.balancer == b && other.inFlight() {
			e.counters.Conflicts++
			return nil, e.conflictError(b)
		}
	}
	resourceType := "loadbalancerworkrequest"
	if b.network != nil {
		resourceType = "nlbworkrequest"
	}
	w := &workRequest{
		id:         newOCID(resourceType, e.opts.Region),
		balancer:   b,
		operation:  wr.operation,
		backendSet: wr.backendSet,
		status:     StateAccepted,
		accepted:   time.Now().UTC(),
		apply:      wr.apply,
		failure:    rc.failure,
		stuckBy:    rc.stuckBy,
	}
	e.workRequests[w.id] = w
	e.workOrder = append(e.workOrder, w)
	e.counters.WorkRequests++
	e.counters.Writes[b.id()]++
	if b.network != nil {
		b.network.LifecycleState = networkloadbalancer.LifecycleStateUpdating
	}
	latency := e.opts.WorkRequestLatency
	if latency <= 0 {
		w.status = StateInProgress
		w.started = w.accepted
		e.finishLocked(w)
		return w, nil
	}
	e.afterLocked(latency/2, func() {
		if w.status == StateAccepted {
			w.status = StateInProgress
			w.started = time.Now().UTC()
		}
	})
	e.afterLocked(latency, func() { e.finishLocked(w) })
	return w, nil
}

// afterLocked runs f under e.mu after d, unless the emulator is closed.
func (e *Emulator) afterLocked(d time.Duration, f func()) {
	if e.closed {
		return
	}
	var t *time.Timer
	t = time.AfterFunc(d, func() {
		pprof.Do(context.Background(), profileLabels, func(context.Context) {
			e.mu.Lock()
			defer e.mu.Unlock()
			if e.closed {
				return
			}
			delete(e.pendingTimers, t)
			f()
		})
	})
	e.pendingTimers[t] = struct{}{}
}

// finishLocked completes an in-flight work request unless a stuck-UPDATING
// fault keeps it in flight; removing that fault finishes it.
func (e *Emulator) finishLocked(w *workRequest) {
	if !w.inFlight() {
		return
	}
	if w.stuckBy != nil && !w.stuckBy.removed {
		if w.status == StateAccepted {
			w.status = StateInProgress
			w.started = time.Now().UTC()
		}
		w.stuck = true
		return
	}
	w.finished = time.Now().UTC()
	if w.started.IsZero() {
		w.started = w.finished
	}
	if w.failure != nil {
		w.status = StateFailed
	} else {
		w.apply()
		w.status = StateSucceeded
	}
	if b := w.balancer; b.network != nil {
		b.network.LifecycleState = networkloadbalancer.LifecycleStateActive
		b.network.TimeUpdated = &common.SDKTime{Time: w.finished}
	}
}

// FinishWorkRequests completes every in-flight work request now, as if its
// latency had passed, except those a StuckUpdating fault keeps in
// flight. Tests use
// it with a long WorkRequestLatency to step through a write deterministically.
func (e *Emulator) FinishWorkRequests() {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, w := range e.workOrder {
		e.finishLocked(w)
	}
}

// releaseStuckLocked finishes the work requests a removed fault was keeping
// in flight.
func (e *Emulator) releaseStuckLocked(f *faultEntry) {
	for _, w := range e.workOrder {
		if w.stuckBy == f && w.stuck {
			e.finishLocked(w)
		}
	}
}

// conflictError is what a write gets while the load balancer is busy, or
// (NLB) FAILED or DELETING. For NLB the code and message are OCI's, as seen
// in public error reports of a write while UPDATING.
// For classic load balancers OCI's exact answer to overlapping writes is not
// publicly documented; it is a 409 whose code Options.ClassicConflictCode sets.
func (e *Emulator) conflictError(b *balancer) *apiError {
	if b.network != nil {
		return &apiError{status: http.StatusConflict, code: "Conflict",
			message: "Invalid State Transition of NLB lifeCycle state from " + titleCase(string(b.network.LifecycleState)) + " to Updating"}
	}
	return &apiError{status: http.StatusConflict, code: e.opts.ClassicConflictCode,
		message: "Load balancer " + b.id() + " has a work request in progress; try again after it completes"}
}

// titleCase writes a lifecycle state as OCI's NLB messages do: FAILED as Failed.
func titleCase(state string) string {
	if state == "" {
		return state
	}
	return state[:1] + strings.ToLower(state[1:])
}

func sdkTime(t time.Time) *common.SDKTime {
	if t.IsZero() {
		return nil
	}
	return &common.SDKTime{Time: t}
}

func (w *workRequest) classicView() loadbalancer.WorkRequest {
	v := loadbalancer.WorkRequest{
		Id:             common.String(w.id),
		LoadBalancerId: common.String(w.balancer.id()),
		Type:           common.String(w.operation),
		LifecycleState: loadbalancer.WorkRequestLifecycleStateEnum(w.status),
		Message:        common.String(w.message()),
		TimeAccepted:   sdkTime(w.accepted),
		TimeFinished:   sdkTime(w.finished),
		CompartmentId:  common.String(w.balancer.compartment()),
		ErrorDetails:   []loadbalancer.WorkRequestError{},
	}
	if w.status == StateFailed {
		f := w.failure.forClassic()
		v.ErrorDetails = append(v.ErrorDetails, loadbalancer.WorkRequestError{
			ErrorCode: loadbalancer.WorkRequestErrorErrorCodeEnum(f.code), Message: common.String(f.message)})
	}
	return v
}

func (w *workRequest) message() string {
	switch w.status {
	case StateSucceeded:
		return w.operation + " succeeded"
	case StateFailed:
		return w.operation + " failed: " + w.failure.forClassic().message
	default:
		return w.operation + " " + w.status
	}
}

// networkErrors are what ListWorkRequestErrors gives for the work request:
// its failure, if it failed.
func (w *workRequest) networkErrors() []networkloadbalancer.WorkRequestError {
	items := []networkloadbalancer.WorkRequestError{}
	if w.status == StateFailed {
		f := w.failure.forNetwork()
		items = append(items, networkloadbalancer.WorkRequestError{
			Code: common.String(f.code), Message: common.String(f.message), Timestamp: sdkTime(w.finished)})
	}
	return items
}

func (w *workRequest) networkView() networkloadbalancer.WorkRequest {
	return networkloadbalancer.WorkRequest(w.networkSummary())
}

// networkOperationTypes maps operation names to the NLB work request types.
var networkOperationTypes = map[string]networkloadbalancer.OperationTypeEnum{
	"UpdateBackendSet": networkloadbalancer.OperationTypeUpdateBackendset,
	"CreateBackend":    networkloadbalancer.OperationTypeCreateBackend,
	"UpdateBackend":    networkloadbalancer.OperationTypeUpdateBackend,
	"DeleteBackend":    networkloadbalancer.OperationTypeDeleteBackend,
}

func (w *workRequest) networkSummary() networkloadbalancer.WorkRequestSummary {
	percent := float32(0)
	action := networkloadbalancer.ActionTypeInProgress
	switch w.status {
	case StateInProgress:
		percent = 50
	case StateSucceeded:
		percent = 100
		action = networkloadbalancer.ActionTypeUpdated
	case StateFailed:
		action = networkloadbalancer.ActionTypeRelated
	}
	return networkloadbalancer.WorkRequestSummary{
		OperationType: networkOperationTypes[w.operation],
		Status:        networkloadbalancer.OperationStatusEnum(w.status),
		Id:            common.String(w.id),
		CompartmentId: common.String(w.balancer.compartment()),
		Resources: []networkloadbalancer.WorkRequestResource{{
			EntityType: common.String("networkloadbalancer"),
			ActionType: action,
			Identifier: common.String(w.balancer.id()),
			EntityUri:  common.String("/20200501/networkLoadBalancers/" + w.balancer.id()),
		}},
		PercentComplete: &percent,
		TimeAccepted:    sdkTime(w.accepted),
		TimeStarted:     sdkTime(w.started),
		TimeFinished:    sdkTime(w.finished),
	}
}
