package ociemu_test

import (
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/oracle/oci-go-sdk/v65/common"
	"github.com/oracle/oci-go-sdk/v65/loadbalancer"
	"github.com/oracle/oci-go-sdk/v65/networkloadbalancer"

	"github.com/peppy-ratio/lbregistrar/test/eventually"
	"github.com/peppy-ratio/lbregistrar/test/ociemu"
)

func (f *fixture) emptyNetworkUpdate() networkloadbalancer.UpdateBackendSetRequest {
	return networkloadbalancer.UpdateBackendSetRequest{NetworkLoadBalancerId: common.String(networkID), BackendSetName: common.String("tcp"),
		UpdateBackendSetDetails: networkloadbalancer.UpdateBackendSetDetails{IsPreserveSource: common.Bool(false), Backends: []networkloadbalancer.BackendDetails{}}}
}

// With real timers a work request goes ACCEPTED -> IN_PROGRESS -> SUCCEEDED;
// a stuck-UPDATING fault keeps it IN_PROGRESS, and the NLB UPDATING, until
// the fault is removed.
func TestStuckUpdating(t *testing.T) {
	transports(t, ociemu.Options{WorkRequestLatency: 50 * time.Millisecond}, func(t *testing.T, f *fixture) {
		stuck := f.emu.AddFault(ociemu.Fault{Operation: "UpdateBackendSet", LoadBalancerID: networkID, StuckUpdating: true})
		update, err := f.nlb.UpdateBackendSet(f.context, f.emptyNetworkUpdate())
		must(t, err)
		eventually.Passes(t, 10*time.Second, 5*time.Millisecond, func() error {
			wr, err := f.nlb.GetWorkRequest(f.context, networkloadbalancer.GetWorkRequestRequest{WorkRequestId: update.OpcWorkRequestId})
			must(t, err)
			if wr.Status != networkloadbalancer.OperationStatusAccepted && wr.Status != networkloadbalancer.OperationStatusInProgress {
				t.Fatalf("work request %s, want IN_PROGRESS", wr.Status)
			}
			if wr.Status == networkloadbalancer.OperationStatusAccepted {
				return fmt.Errorf("work request still %s, want IN_PROGRESS", wr.Status)
			}
			return nil
		})
		f.emu.FinishWorkRequests() // does not release a stuck one
		if state := f.emu.LifecycleState(networkID); state != "UPDATING" {
			t.Fatalf("stuck NLB is %s", state)
		}
		_, err = f.nlb.UpdateBackendSet(f.context, f.emptyNetworkUpdate())
		serviceError(t, err, 409, "Conflict")

		f.emu.RemoveFault(stuck)
		if wr := f.waitNetwork(t, *update.OpcWorkRequestId); wr.Status != networkloadbalancer.OperationStatusSucceeded {
			t.Fatalf("released work request %s", wr.Status)
		}
		if state := f.emu.LifecycleState(networkID); state != "ACTIVE" {
			t.Errorf("released NLB is %s", state)
		}

		// A classic load balancer has no UPDATING state; its work request is
		// kept in flight.
		f.emu.AddFault(ociemu.Fault{LoadBalancerID: classicID, StuckUpdating: true})
		lbUpdate, err := f.lb.UpdateBackendSet(f.context, loadbalancer.UpdateBackendSetRequest{LoadBalancerId: common.String(classicID),
			BackendSetName: common.String("web"), UpdateBackendSetDetails: classicDetails(f.classicSet(t).BackendSet)})
		must(t, err)
		f.waitStuck(t, *lbUpdate.OpcWorkRequestId) // past the latency, when it would have finished
		f.emu.FinishWorkRequests()
		wr, err := f.lb.GetWorkRequest(f.context, loadbalancer.GetWorkRequestRequest{WorkRequestId: lbUpdate.OpcWorkRequestId})
		must(t, err)
		if wr.LifecycleState != loadbalancer.WorkRequestLifecycleStateInProgress || f.emu.LifecycleState(classicID) != "ACTIVE" {
			t.Errorf("stuck classic work request %s, load balancer %s", wr.LifecycleState, f.emu.LifecycleState(classicID))
		}
		f.emu.ClearFaults()
		if wr := f.waitClassic(t, *lbUpdate.OpcWorkRequestId); wr.LifecycleState != loadbalancer.WorkRequestLifecycleStateSucceeded {
			t.Errorf("released classic work request %s", wr.LifecycleState)
		}
	})
}

// A FailWorkRequest fault accepts the write, then ends its work request
// FAILED without changing the load balancer.
func TestFailedWorkRequest(t *testing.T) {
	transports(t, ociemu.Options{}, func(t *testing.T, f *fixture) {
		f.emu.AddFault(ociemu.Fault{Operation: "UpdateBackendSet", FailWorkRequest: true, Times: 2})
		before := f.classicSet(t)
		lbUpdate, err := f.lb.UpdateBackendSet(f.context, loadbalancer.UpdateBackendSetRequest{LoadBalancerId: common.String(classicID),
			BackendSetName: common.String("web"), UpdateBackendSetDetails: classicDetails(before.BackendSet)})
		must(t, err)
		wr := f.waitClassic(t, *lbUpdate.OpcWorkRequestId)
		if wr.LifecycleState != loadbalancer.WorkRequestLifecycleStateFailed || len(wr.ErrorDetails) != 1 {
			t.Errorf("work request %s, errors %v", wr.LifecycleState, wr.ErrorDetails)
		}
		if after := f.classicSet(t); *after.ETag != *before.ETag || len(after.Backends) != 1 {
			t.Errorf("a failed work request changed the backend set: %v", after.BackendSet)
		}

		nlbUpdate, err := f.nlb.UpdateBackendSet(f.context, f.emptyNetworkUpdate())
		must(t, err)
		if wr := f.waitNetwork(t, *nlbUpdate.OpcWorkRequestId); wr.Status != networkloadbalancer.OperationStatusFailed {
			t.Errorf("NLB work request %s", wr.Status)
		}
		if backends, _ := f.emu.Backends(networkID, "tcp"); len(backends) != 2 || f.emu.LifecycleState(networkID) != "ACTIVE" {
			t.Errorf("after a failed work request: %s %v", f.emu.LifecycleState(networkID), backends)
		}

		// The fault was used up: the next write succeeds.
		again, err := f.nlb.UpdateBackendSet(f.context, f.emptyNetworkUpdate())
		must(t, err)
		if wr := f.waitNetwork(t, *again.OpcWorkRequestId); wr.Status != networkloadbalancer.OperationStatusSucceeded {
			t.Errorf("after the fault: %s", wr.Status)
		}
	})
}

// Why a work request failed: a classic one says it in errorDetails, an NLB
// one in ListWorkRequestErrors; by default as a service error, or with the
// fault's code and message.
func TestWhyAWorkRequestFailed(t *testing.T) {
	transports(t, ociemu.Options{}, func(t *testing.T, f *fixture) {
		for _, tc := range []struct {
			fault                    ociemu.Fault
			classicCode, networkCode string
		}{
			{ociemu.Fault{}, "INTERNAL_ERROR", "InternalServerError"},
			{ociemu.Fault{FailCode: "BAD_INPUT", FailMessage: "backend 10.0.0.1:80 is not in a subnet the load balancer reaches"}, "BAD_INPUT", ""},
			{ociemu.Fault{FailCode: "LimitExceeded", FailMessage: "too many backends"}, "", "LimitExceeded"},
		} {
			tc.fault.Operation, tc.fault.FailWorkRequest, tc.fault.Times = "UpdateBackendSet", true, 1
			if tc.classicCode != "" {
				f.emu.AddFault(tc.fault)
				update, err := f.lb.UpdateBackendSet(f.context, loadbalancer.UpdateBackendSetRequest{LoadBalancerId: common.String(classicID),
					BackendSetName: common.String("web"), UpdateBackendSetDetails: classicDetails(f.classicSet(t).BackendSet)})
				must(t, err)
				wr := f.waitClassic(t, *update.OpcWorkRequestId)
				if len(wr.ErrorDetails) != 1 || string(wr.ErrorDetails[0].ErrorCode) != tc.classicCode ||
					(tc.fault.FailMessage != "" && *wr.ErrorDetails[0].Message != tc.fault.FailMessage) {
					t.Errorf("classic errorDetails %+v, want %s %q", wr.ErrorDetails, tc.classicCode, tc.fault.FailMessage)
				}
			}
			if tc.networkCode != "" {
				f.emu.AddFault(tc.fault)
				errs := f.networkWriteErrors(t)
				if len(errs.Items) != 1 || *errs.Items[0].Code != tc.networkCode || errs.Items[0].Timestamp == nil ||
					(tc.fault.FailMessage != "" && *errs.Items[0].Message != tc.fault.FailMessage) {
					t.Errorf("ListWorkRequestErrors %+v, want %s %q", errs.Items, tc.networkCode, tc.fault.FailMessage)
				}
			}
		}
		if errs := f.networkWriteErrors(t); len(errs.Items) != 0 {
			t.Errorf("errors of a work request that succeeded: %v", errs.Items)
		}
	})
}

// networkWriteErrors writes the NLB's backend set, waits for the work
// request and lists its errors.
func (f *fixture) networkWriteErrors(t *testing.T) networkloadbalancer.ListWorkRequestErrorsResponse {
	t.Helper()
	update, err := f.nlb.UpdateBackendSet(f.context, f.emptyNetworkUpdate())
	must(t, err)
	f.waitNetwork(t, *update.OpcWorkRequestId)
	errs, err := f.nlb.ListWorkRequestErrors(f.context, networkloadbalancer.ListWorkRequestErrorsRequest{
		WorkRequestId: update.OpcWorkRequestId, CompartmentId: common.String(compartment)})
	must(t, err)
	return errs
}

// Status faults answer with OCI's codes, scoped by operation and load balancer.
func TestStatusFaults(t *testing.T) {
	transports(t, ociemu.Options{}, func(t *testing.T, f *fixture) {
		f.emu.AddFault(ociemu.Fault{Operation: "GetBackendSet", LoadBalancerID: classicID, Status: 429, RetryAfter: 2 * time.Second, Times: 1})
		resp, err := f.lb.GetBackendSet(f.context, loadbalancer.GetBackendSetRequest{LoadBalancerId: common.String(classicID), BackendSetName: common.String("web")})
		serviceError(t, err, 429, "TooManyRequests")
		if resp.RawResponse == nil || resp.RawResponse.Header.Get("retry-after") != "2" {
			t.Errorf("429 without retry-after: %v", resp.RawResponse)
		}
		f.networkSet(t) // other load balancer: unaffected
		f.classicSet(t) // the fault was used once

		f.emu.AddFault(ociemu.Fault{Operation: "UpdateBackendSet", LoadBalancerID: networkID, Status: 500})
		_, err = f.nlb.UpdateBackendSet(f.context, f.emptyNetworkUpdate())
		serviceError(t, err, 500, "InternalServerError")
		f.emu.ClearFaults()
		f.emu.AddFault(ociemu.Fault{LoadBalancerID: networkID, Status: 503})
		_, err = f.nlb.UpdateBackendSet(f.context, f.emptyNetworkUpdate())
		serviceError(t, err, 503, "ServiceUnavailable")
		_, err = f.nlb.GetNetworkLoadBalancer(f.context, networkloadbalancer.GetNetworkLoadBalancerRequest{NetworkLoadBalancerId: common.String(networkID)})
		serviceError(t, err, 503, "ServiceUnavailable")
		f.emu.AddFault(ociemu.Fault{Operation: "GetLoadBalancer", Status: 500, Code: "InternalError"})
		_, err = f.lb.GetLoadBalancer(f.context, loadbalancer.GetLoadBalancerRequest{LoadBalancerId: common.String(classicID)})
		serviceError(t, err, 500, "InternalError")

		if c := f.emu.Counters(); c.WorkRequests != 0 {
			t.Errorf("faulted writes created %d work requests", c.WorkRequests)
		}
		var faulted int
		for _, c := range f.emu.Calls() {
			if c.Fault {
				faulted++
			}
		}
		if faulted != 5 {
			t.Errorf("%d calls marked as faulted, want 5", faulted)
		}
	})
}

func TestDelayFault(t *testing.T) {
	f := newFixture(t, ociemu.Options{}, false)
	f.emu.AddFault(ociemu.Fault{Operation: "GetNetworkLoadBalancer", Delay: 300 * time.Millisecond})
	start := time.Now()
	_, err := f.nlb.GetNetworkLoadBalancer(f.context, networkloadbalancer.GetNetworkLoadBalancerRequest{NetworkLoadBalancerId: common.String(networkID)})
	must(t, err)
	if elapsed := time.Since(start); elapsed < 300*time.Millisecond {
		t.Errorf("answered after %s, before the added latency", elapsed)
	}
}

// The call log and counters describe what the emulator answered.
func TestCallLogAndCounters(t *testing.T) {
	f := newFixture(t, slow, false)
	set := f.classicSet(t)
	update, err := f.lb.UpdateBackendSet(f.context, loadbalancer.UpdateBackendSetRequest{LoadBalancerId: common.String(classicID),
		BackendSetName: common.String("web"), UpdateBackendSetDetails: classicDetails(set.BackendSet), IfMatch: set.ETag,
		OpcRetryToken: common.String("token-a")})
	must(t, err)
	_, err = f.lb.GetWorkRequest(f.context, loadbalancer.GetWorkRequestRequest{WorkRequestId: update.OpcWorkRequestId})
	must(t, err)

	calls := f.emu.Calls()
	if len(calls) != 3 {
		t.Fatalf("%d calls: %+v", len(calls), calls)
	}
	if c := calls[1]; c.Operation != "UpdateBackendSet" || c.Method != "PUT" || c.LoadBalancerID != classicID || c.Status != 204 ||
		c.WorkRequestID != *update.OpcWorkRequestId || c.RetryToken != "token-a" || c.IfMatch != *set.ETag || c.RequestID != *update.OpcRequestId {
		t.Errorf("update call %+v", c)
	}
	if c := calls[2]; c.Operation != "GetWorkRequest" || c.LoadBalancerID != classicID || c.Status != 200 {
		t.Errorf("work request call %+v", c)
	}
	if c := f.emu.Counters(); c.Requests != 3 || c.Writes[classicID] != 1 || c.WorkRequests != 1 || c.Conflicts != 0 {
		t.Errorf("counters %+v", c)
	}
	if wrs := f.emu.WorkRequests(); len(wrs) != 1 || wrs[0].Status != ociemu.StateAccepted || wrs[0].BackendSet != "web" {
		t.Errorf("work requests %+v", wrs)
	}
	f.emu.ResetCalls()
	if len(f.emu.Calls()) != 0 || f.emu.Counters().Requests != 0 {
		t.Errorf("ResetCalls left %+v", f.emu.Counters())
	}
}

// The SDK's per-client circuit breaker (on by default for both services)
// opens after 10 requests of which 80% failed with 429 or 5xx, and then
// fails calls without sending them. Fault tests therefore set
// Configuration.CircuitBreaker to nil, as the fixture does.
func TestDefaultCircuitBreakerHidesFaults(t *testing.T) {
	f := newFixture(t, ociemu.Options{}, false)
	nlb, err := networkloadbalancer.NewNetworkLoadBalancerClientWithConfigurationProvider(f.config)
	must(t, err)
	nlb.Host = f.emu.URL()
	noRetry := common.NoRetryPolicy() // the NLB client retries 429 and 5xx by default
	nlb.Configuration.RetryPolicy = &noRetry
	if nlb.Configuration.CircuitBreaker == nil {
		t.Skip("the SDK no longer enables a circuit breaker by default (OCI_SDK_DEFAULT_CIRCUITBREAKER_ENABLED=false?)")
	}
	f.emu.AddFault(ociemu.Fault{Status: 503})
	var breakerErrors int
	for range 12 {
		_, err := nlb.GetNetworkLoadBalancer(f.context, networkloadbalancer.GetNetworkLoadBalancerRequest{NetworkLoadBalancerId: common.String(networkID)})
		if _, isService := common.IsServiceError(err); !isService {
			breakerErrors++
		}
	}
	if sent := len(f.emu.Calls()); sent != 10 || breakerErrors != 2 {
		t.Errorf("%d requests reached the emulator and %d calls failed in the client; want 10 and 2", sent, breakerErrors)
	}
}

// Unlike the classic client, the NLB client retries 429 and 5xx by default
// (common.DefaultRetryPolicy), reusing the write's opc-retry-token; a 409
// Conflict is not retried.
func TestNetworkClientRetriesByDefault(t *testing.T) {
	f := newFixture(t, ociemu.Options{}, false)
	nlb, err := networkloadbalancer.NewNetworkLoadBalancerClientWithConfigurationProvider(f.config)
	must(t, err)
	nlb.Host = f.emu.URL()
	nlb.Configuration.CircuitBreaker = nil
	f.emu.AddFault(ociemu.Fault{Operation: "UpdateBackendSet", Status: 503, Times: 1})
	_, err = nlb.UpdateBackendSet(f.context, f.emptyNetworkUpdate())
	must(t, err)
	calls := f.emu.Calls()
	if len(calls) != 2 || calls[0].Status != 503 || calls[1].Status != 202 || calls[0].RetryToken == "" || calls[0].RetryToken != calls[1].RetryToken {
		t.Errorf("calls %+v", calls)
	}

	f.emu.AddFault(ociemu.Fault{Operation: "UpdateBackendSet", StuckUpdating: true})
	_, err = nlb.UpdateBackendSet(f.context, f.emptyNetworkUpdate())
	must(t, err)
	_, err = nlb.UpdateBackendSet(f.context, f.emptyNetworkUpdate())
	serviceError(t, err, 409, "Conflict")
	if n := len(f.emu.Calls()); n != 4 {
		t.Errorf("the 409 was retried: %d calls", n)
	}
}

// A lost answer: the write is served (its work request created and run, its
// retry token remembered) but the client sees a 5xx or a cut connection; a
// retry with the same token gets the first work request, not a second write.
func TestLostResponse(t *testing.T) {
	transports(t, slow, func(t *testing.T, f *fixture) {
		for i, fault := range []ociemu.Fault{{Status: 504, Code: "GatewayTimeout"}, {}} {
			fault.Operation, fault.LoadBalancerID, fault.LoseResponse, fault.Times = "UpdateBackendSet", networkID, true, 1
			f.emu.AddFault(fault)
			req := f.emptyNetworkUpdate()
			req.OpcRetryToken = common.String("lost-" + strconv.Itoa(i))
			_, err := f.nlb.UpdateBackendSet(f.context, req)
			if fault.Status != 0 {
				serviceError(t, err, 504, "GatewayTimeout")
			} else if _, isService := common.IsServiceError(err); err == nil || isService {
				t.Fatalf("cut connection: %v", err)
			}
			calls := f.emu.Calls()
			lost := calls[len(calls)-1]
			if lost.WorkRequestID == "" || !lost.Fault {
				t.Fatalf("lost write not served: %+v", lost)
			}
			retry, err := f.nlb.UpdateBackendSet(f.context, req)
			must(t, err)
			if *retry.OpcWorkRequestId != lost.WorkRequestID {
				t.Errorf("retry with the same token: work request %s, want the lost one %s", *retry.OpcWorkRequestId, lost.WorkRequestID)
			}
			f.emu.FinishWorkRequests()
			if c := f.emu.Counters(); c.WorkRequests != i+1 || c.Conflicts != 0 {
				t.Errorf("counters %+v: want one work request per lost write and no conflict", c)
			}
		}
	})
}
