package oci

import (
	"context"
	"sync"
	"time"

	"github.com/oracle/oci-go-sdk/v65/common"
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
	// keeps the load balancer busy, and OCI answers other writes 409
	// meanwhile.
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

// Listing work requests is paged as Oracle's cloud controller manager pages
// it (100 a page, every page): OCI promises no order, so the first page may
// contain neither the newest nor those in flight. At most workRequestPages are
// read, a bound on one listing's work; a compartment with more NLB work
// requests than that is listed in part.
const (
	workRequestPageSize = 100
	workRequestPages    = 10
)

// eachPage sends list for each page of a listing, at most workRequestPages:
// list asks for page (nil for the first) and returns the next page's token.
func eachPage(ctx context.Context, op string, list func(ctx context.Context, page *string) (next *string, err error)) error {
	var page *string
	for range workRequestPages {
		sdkCtx, cs := call(ctx)
		next, err := list(sdkCtx, page)
		if err := classify(op, err, cs); err != nil {
			return err
		}
		if page = next; page == nil {
			break
		}
	}
	return nil
}

// WorkRequests lists a load balancer's work requests: those in flight after
// a write answered 409 are another writer's (another cluster, Terraform, the
// console) to wait for rather than to retry against, as Oracle's cloud
// controller manager looks before it updates a load balancer; those ended
// since the last look are changes another writer made.
func (c *Client) WorkRequests(ctx context.Context, loadBalancerID string) ([]WorkRequest, error) {
	return c.WorkRequestsSince(ctx, loadBalancerID, time.Now())
}

// WorkRequestsSince is WorkRequests from a listing started at since or
// later. An NLB's work requests are listed by compartment, every page of
// it, so one listing serves every NLB of the compartment this client reads
// until since passes it: the watch's rounds list 50 NLBs of one
// compartment once, not 50 times.
func (c *Client) WorkRequestsSince(ctx context.Context, loadBalancerID string, since time.Time) ([]WorkRequest, error) {
	var out []WorkRequest
	if !IsNetworkLoadBalancer(loadBalancerID) {
		err := eachPage(ctx, opListWorkRequests, func(ctx context.Context, page *string) (*string, error) {
			resp, err := c.lb.ListWorkRequests(ctx, loadbalancer.ListWorkRequestsRequest{
				LoadBalancerId: &loadBalancerID, Limit: common.Int64(workRequestPageSize), Page: page})
			for _, wr := range resp.Items {
				switch wr.LifecycleState {
				case loadbalancer.WorkRequestLifecycleStateAccepted, loadbalancer.WorkRequestLifecycleStateInProgress:
					out = append(out, WorkRequest{ID: deref(wr.Id)})
				default:
					out = append(out, WorkRequest{ID: deref(wr.Id), Ended: true})
				}
			}
			return resp.OpcNextPage, err
		})
		if err != nil {
			return nil, err
		}
		return out, nil
	}
	// NLB work requests are listed by compartment: the load balancer's.
	nlb, err := c.readNLB(ctx, loadBalancerID)
	if err != nil {
		return nil, err
	}
	items, err := c.compartmentWorkRequests(ctx, nlb.compartment, since)
	if err != nil {
		return nil, err
	}
	for _, wr := range items {
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

// compartmentListings keeps each compartment's last NLB work request
// listing, and when it started.
type compartmentListings struct {
	mu sync.Mutex
	by map[string]compartmentListing
}

type compartmentListing struct {
	start time.Time
	items []networkloadbalancer.WorkRequestSummary
}

// compartmentWorkRequests lists the NLB work requests of a compartment,
// or serves the last listing if it started at since or later.
func (c *Client) compartmentWorkRequests(ctx context.Context, compartment *string, since time.Time) ([]networkloadbalancer.WorkRequestSummary, error) {
	key := deref(compartment)
	c.listings.mu.Lock()
	last, ok := c.listings.by[key]
	c.listings.mu.Unlock()
	if ok && !last.start.Before(since) {
		return last.items, nil
	}
	start := time.Now()
	var items []networkloadbalancer.WorkRequestSummary
	err := eachPage(ctx, opListWorkRequests, func(ctx context.Context, page *string) (*string, error) {
		resp, err := c.nlb.ListWorkRequests(ctx, networkloadbalancer.ListWorkRequestsRequest{
			CompartmentId: compartment, Limit: common.Int(workRequestPageSize), Page: page})
		items = append(items, resp.Items...)
		return resp.OpcNextPage, err
	})
	if err != nil {
		return nil, err
	}
	c.listings.mu.Lock()
	defer c.listings.mu.Unlock()
	if cur, ok := c.listings.by[key]; !ok || cur.start.Before(start) {
		c.listings.by[key] = compartmentListing{start: start, items: items}
	}
	return items, nil
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
