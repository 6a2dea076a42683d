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

// InFlightWorkRequests lists the work requests of a load balancer that have
// not ended (ACCEPTED or IN_PROGRESS): after a write answered 409, another
// writer's (another cluster, Terraform, the console), to wait for rather
// than to retry against. Oracle's cloud controller manager looks the same
// way before it updates a load balancer. Only the first page is read: the
// newest work requests come first, and a busy load balancer has one or two.
func (c *Client) InFlightWorkRequests(ctx context.Context, loadBalancerID string) ([]string, error) {
	sdkCtx, cs := call(ctx)
	var ids []string
	if !IsNetworkLoadBalancer(loadBalancerID) {
		resp, err := c.lb.ListWorkRequests(sdkCtx, loadbalancer.ListWorkRequestsRequest{LoadBalancerId: &loadBalancerID})
		if err := classify(opListWorkRequests, err, cs); err != nil {
			return nil, err
		}
		for _, wr := range resp.Items {
			switch wr.LifecycleState {
			case loadbalancer.WorkRequestLifecycleStateAccepted, loadbalancer.WorkRequestLifecycleStateInProgress:
				ids = append(ids, deref(wr.Id))
			}
		}
		return ids, nil
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
		switch wr.Status {
		case networkloadbalancer.OperationStatusAccepted, networkloadbalancer.OperationStatusInProgress:
		default:
			continue
		}
		for _, r := range wr.Resources {
			if deref(r.Identifier) == loadBalancerID {
				ids = append(ids, deref(wr.Id))
				break
			}
		}
	}
	return ids, nil
}
