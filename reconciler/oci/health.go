package oci

import (
	"context"

	"github.com/oracle/oci-go-sdk/v65/loadbalancer"
	"github.com/oracle/oci-go-sdk/v65/networkloadbalancer"
)

// BackendSetHealth is what OCI's health checks say of one backend set: its
// overall status, and the backends, by the ip:port names OCI gives them, in
// each state but OK; OCI lists no OK backend.
type BackendSetHealth struct {
	Status                     string
	Warning, Critical, Unknown []string
}

// GetBackendSetHealth reads the health of one backend set.
func (c *Client) GetBackendSetHealth(ctx context.Context, loadBalancerID, name string) (*BackendSetHealth, error) {
	sdkCtx, cs := call(ctx)
	if IsNetworkLoadBalancer(loadBalancerID) {
		resp, err := c.nlb.GetBackendSetHealth(sdkCtx, networkloadbalancer.GetBackendSetHealthRequest{
			NetworkLoadBalancerId: &loadBalancerID, BackendSetName: &name,
		})
		if err := classify("GetBackendSetHealth", err, cs); err != nil {
			return nil, err
		}
		h := resp.BackendSetHealth
		return &BackendSetHealth{Status: string(h.Status), Warning: h.WarningStateBackendNames,
			Critical: h.CriticalStateBackendNames, Unknown: h.UnknownStateBackendNames}, nil
	}
	resp, err := c.lb.GetBackendSetHealth(sdkCtx, loadbalancer.GetBackendSetHealthRequest{
		LoadBalancerId: &loadBalancerID, BackendSetName: &name,
	})
	if err := classify("GetBackendSetHealth", err, cs); err != nil {
		return nil, err
	}
	h := resp.BackendSetHealth
	return &BackendSetHealth{Status: string(h.Status), Warning: h.WarningStateBackendNames,
		Critical: h.CriticalStateBackendNames, Unknown: h.UnknownStateBackendNames}, nil
}
