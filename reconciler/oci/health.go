package oci

import (
	"context"
	"strconv"
	"strings"

	"github.com/oracle/oci-go-sdk/v65/loadbalancer"
	"github.com/oracle/oci-go-sdk/v65/networkloadbalancer"

	"github.com/peppy-ratio/lbregistrar/reconciler/plan"
)

// BackendSetHealth is what OCI's health checks say of one backend set: its
// overall status, and the backends, by the ip:port names OCI gives them, in
// each state but OK; OCI lists no OK backend.
type BackendSetHealth struct {
	Status                     string
	Warning, Critical, Unknown []string
}

// NotOK is the state (WARNING, CRITICAL, UNKNOWN) of each backend OCI
// lists, by its plan.Key; a backend not in it is OK.
func (h *BackendSetHealth) NotOK() map[string]string {
	state := map[string]string{}
	for status, names := range map[string][]string{"WARNING": h.Warning, "CRITICAL": h.Critical, "UNKNOWN": h.Unknown} {
		for _, n := range names {
			state[nameKey(n)] = status
		}
	}
	return state
}

// Unlisted is the state of a backend OCI does not list: OK, but when the
// overall status is not OK and OCI lists no backend at all. OCI's
// overall UNKNOWN covers "the system was unable to retrieve metrics" and
// a backend set with no listener (oci-go-sdk loadbalancer.BackendSetHealth
// and networkloadbalancer.BackendSetHealth, Status), and probes not sent
// yet, and may then name no backend: nothing is known to be OK, and every
// backend takes the overall status.
func (h *BackendSetHealth) Unlisted() string {
	if h.Status == "" || h.Status == "OK" || len(h.Warning)+len(h.Critical)+len(h.Unknown) > 0 {
		return "OK"
	}
	return h.Status
}

// nameKey is the plan key of a backend name OCI reports, ip:port; an IPv6
// address may come without brackets, so the port follows the last colon.
func nameKey(name string) string {
	i := strings.LastIndexByte(name, ':')
	if i < 0 {
		return name
	}
	port, err := strconv.ParseInt(name[i+1:], 10, 32)
	if err != nil {
		return name
	}
	return plan.Key(strings.Trim(name[:i], "[]"), int32(port))
}

// GetBackendSetHealth reads the health of one backend set.
func (c *Client) GetBackendSetHealth(ctx context.Context, loadBalancerID, name string) (*BackendSetHealth, error) {
	sdkCtx, cs := call(ctx)
	if IsNetworkLoadBalancer(loadBalancerID) {
		var h networkloadbalancer.BackendSetHealth
		_, err := readOne(sdkCtx, &c.nlb.BaseClient, "networkLoadBalancer", "GetBackendSetHealth",
			"/networkLoadBalancers/"+loadBalancerID+"/backendSets/"+name+"/health", &h)
		if err := classify("GetBackendSetHealth", err, cs); err != nil {
			return nil, err
		}
		return &BackendSetHealth{Status: string(h.Status), Warning: h.WarningStateBackendNames,
			Critical: h.CriticalStateBackendNames, Unknown: h.UnknownStateBackendNames}, nil
	}
	var h loadbalancer.BackendSetHealth
	_, err := readOne(sdkCtx, &c.lb.BaseClient, "loadBalancer", "GetBackendSetHealth",
		"/loadBalancers/"+loadBalancerID+"/backendSets/"+name+"/health", &h)
	if err := classify("GetBackendSetHealth", err, cs); err != nil {
		return nil, err
	}
	return &BackendSetHealth{Status: string(h.Status), Warning: h.WarningStateBackendNames,
		Critical: h.CriticalStateBackendNames, Unknown: h.UnknownStateBackendNames}, nil
}
