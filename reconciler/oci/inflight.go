package oci

import (
	"context"

	"github.com/oracle/oci-go-sdk/v65/loadbalancer"
	"github.com/oracle/oci-go-sdk/v65/networkloadbalancer"
)

const (
	opListWorkRequests       = "ListWorkRequests"
	opGetNetworkLoadBalancer = "GetNetworkLoadBalancer"
)

// WorkRequest is one of a load balancer's work requests as a listing shows it.
type WorkRequest struct {
	ID string
	// Ended: SUCCEEDED, FAILED or (NLB) CANCELED; one that has not ended
	// holds the load balancer, and OCI answers other writes 409 meanwhile.
	Ended bool
}

// InFlight are the IDs of those of wrs that have not ended.
func InFlight(wrs []WorkRequest) []string {
	var ids []string
	for _, wr := range wrs {
		if !wr.Ended {
			ids = append(ids, wr.ID)
		}
	}
	return ids
}

// WorkRequests lists a load balancer's work requests, newest first: those
// in flight after a write answered 409 are another writer's (another
// cluster, Terraform, the console) to wait for rather than to retry against,
// as Oracle's cloud controller manager looks before it updates a load
// balancer; those ended since the last look are changes another writer
// made. Only the first page is read: the newest work requests come first.
func (c *Client) WorkRequests(ctx context.Context, loadBalancerID string) ([]WorkRequest, error) {
	sdkCtx, cs := call(ctx)
	var out []WorkRequest
	if !IsNetworkLoadBalancer(loadBalancerID) {
		resp, err := c.lb.ListWorkRequests(sdkCtx, loadbalancer.ListWorkRequestsRequest{LoadBalancerId: &loadBalancerID})
		if err := classify(opListWorkRequests, err, cs); err != nil {
			return nil, err
		}
		for _, wr := range resp.Items {
			switch wr.LifecycleState {
			case loadbalancer.WorkRequestLifecycleStateAccepted, loadbalancer.WorkRequestLifecycleStateInProgress:
				out = append(out, WorkRequest{ID: deref(wr.Id)})
			default:
				out = append(out, WorkRequest{ID: deref(wr.Id), Ended: true})
			}
		}
		return out, nil
	}
	// NLB work requests are listed by compartment: the load balancer's.
	nlb, err := c.nlb.GetNetworkLoadBalancer(sdkCtx, networkloadbalancer.GetNetworkLoadBalancerRequest{NetworkLoadBalancerId: &loadBalancerID})
	if err := classify(opGetNetworkLoadBalancer, err, cs); err != nil {
		return nil, err
	}
	sdkCtx, cs = call(ctx)
	resp, err := c.nlb.ListWorkRequests(sdkCtx, networkloadbalancer.ListWorkRequestsRequest{CompartmentId: nlb.CompartmentId})
	if err := classify(opListWorkRequests, err, cs); err != nil {
		return nil, err
	}
	for _, wr := range resp.Items {
		if !touches(wr, loadBalancerID) {
			continue
		}
		switch wr.Status {
		case networkloadbalancer.OperationStatusSucceeded, networkloadbalancer.OperationStatusFailed, networkloadbalancer.OperationStatusCanceled:
			out = append(out, WorkRequest{ID: deref(wr.Id), Ended: true})
		default: // ACCEPTED, IN_PROGRESS, CANCELING
			out = append(out, WorkRequest{ID: deref(wr.Id)})
		}
	}
	return out, nil
}

// touches reports whether an NLB work request acts on the load balancer.
func touches(wr networkloadbalancer.WorkRequestSummary, loadBalancerID string) bool {
	for _, r := range wr.Resources {
		if deref(r.Identifier) == loadBalancerID {
			return true
		}
	}
	return false
}
