package oci

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/oracle/oci-go-sdk/v65/common"
	"github.com/oracle/oci-go-sdk/v65/loadbalancer"
	"github.com/oracle/oci-go-sdk/v65/networkloadbalancer"

	"github.com/peppy-ratio/lbregistrar/reconciler/plan"
)

// BackendSet is a backend set as read, with what a write must carry forward.
type BackendSet struct {
	LoadBalancerID string
	Name           string
	// Backends are the backends, in the order OCI returned them; an NLB's
	// given by instance alone have no IP.
	Backends []plan.Backend
	ETag     string
	// IPVersion is the IP version an NLB backend set takes, IPV4 or IPV6
	// (IPV4 when it says none); "" for a classic one, which does not say.
	IPVersion string
	// PreservesSource is set for an NLB backend set that preserves the
	// client's source address (isPreserveSource, true when unset as OCI
	// documents): OCI selects its backends by instance.
	PreservesSource bool
	// Protocols are the protocols an NLB's listeners forward to the
	// backend set (see forwarded); none when no listener uses it,
	// and for a classic backend set, whose listeners all carry TCP.
	Protocols []string
	// ProtocolsUnread says why an NLB's listeners, and so Protocols, are
	// not known: they could not be read, and no earlier read stands in.
	// The backend set itself was read.
	ProtocolsUnread error
	// Others are the backends the load balancer's other backend sets
	// had at its last read (at most loadBalancerTTL old), which count
	// against its limit in all; -1 when not known.
	Others int

	lb  *loadbalancer.BackendSet
	nlb *networkloadbalancer.BackendSet
}

// OCI's documented backend limits (docs/oci-emulator.md): 512 per backend
// set on both services, and in all 512 per classic load balancer and 1024
// per NLB ("Limits on Load Balancing Resources": "512 backend servers per
// backend set", "512 backend servers total"; "Limits on Network Load
// Balancers": "1024 backend servers total"); 2 in a non-preemptive NLB
// backend set ("A Non-preemption mode backend set only has a maximum of
// two backend servers", Backend Sets for Network Load Balancers).
const (
	backendsPerSet        = 512
	backendsPerClassic    = 512
	backendsPerNLB        = 1024
	nonPreemptiveBackends = 2
)

// HealthSchedule is how OCI's health checker checks a backend set's
// backends: one check every Interval, each given up to Timeout, a
// backend's state changing only after Retries checks in a row disagree
// with it (oci-go-sdk loadbalancer.HealthChecker and
// networkloadbalancer.HealthChecker: retries "also applies when recovering
// a server to the healthy state", default 3; interval default 10000 ms;
// timeout default 3000 ms).
type HealthSchedule struct {
	Interval, Timeout time.Duration
	Retries           int
}

// Settle is how long after a backend's server changes OCI can still
// report what its checks found of the one before: Retries checks, one
// more interval for a check under way at the change, and its timeout.
func (h HealthSchedule) Settle() time.Duration {
	return time.Duration(h.Retries+1)*h.Interval + h.Timeout
}

// HealthCheckPort is the port the backend set's health checker probes on
// every backend, 0 when it probes each backend's own port (oci-go-sdk
// HealthChecker.Port: "If the port is not specified, the load balancer
// uses the port information from the Backend object").
func (bs *BackendSet) HealthCheckPort() int32 {
	var port *int
	switch {
	case bs == nil:
	case bs.lb != nil && bs.lb.HealthChecker != nil:
		port = bs.lb.HealthChecker.Port
	case bs.nlb != nil && bs.nlb.HealthChecker != nil:
		port = bs.nlb.HealthChecker.Port
	}
	if port == nil {
		return 0
	}
	return int32(*port)
}

// HealthSchedule is the backend set's health checker's schedule; for a set
// not read (nil), or a setting it does not give, OCI's defaults.
func (bs *BackendSet) HealthSchedule() HealthSchedule {
	retries, interval, timeout := 3, 10000, 3000
	pick := func(v *int, into *int) {
		if v != nil && *v > 0 {
			*into = *v
		}
	}
	switch {
	case bs != nil && bs.lb != nil && bs.lb.HealthChecker != nil:
		h := bs.lb.HealthChecker
		pick(h.Retries, &retries)
		pick(h.IntervalInMillis, &interval)
		pick(h.TimeoutInMillis, &timeout)
	case bs != nil && bs.nlb != nil && bs.nlb.HealthChecker != nil:
		h := bs.nlb.HealthChecker
		pick(h.Retries, &retries)
		pick(h.IntervalInMillis, &interval)
		pick(h.TimeoutInMillis, &timeout)
	}
	return HealthSchedule{Interval: time.Duration(interval) * time.Millisecond, Timeout: time.Duration(timeout) * time.Millisecond, Retries: retries}
}

// BackendLimit is the most backends OCI lets the backend set have: its own
// limit, or the room its load balancer's limit in all leaves it beside
// the others' backends (as last read) and the room reserved for others,
// whichever is less; for one not read (nil), the limit of every backend
// set.
func (bs *BackendSet) BackendLimit(reserved int) int {
	switch {
	case bs == nil:
		return backendsPerSet
	case bs.nlb != nil && bs.nlb.AreOperationallyActiveBackendsPreferred != nil && *bs.nlb.AreOperationallyActiveBackendsPreferred:
		return nonPreemptiveBackends
	case bs.Others < 0:
		return backendsPerSet
	}
	total := backendsPerClassic
	if bs.nlb != nil {
		total = backendsPerNLB
	}
	return max(min(backendsPerSet, total-bs.Others-reserved), 0)
}

// GetBackendSet reads one backend set. A 404 says whether the load
// balancer itself answers 404 too (IsLoadBalancerMissing).
func (c *Client) GetBackendSet(ctx context.Context, loadBalancerID, name string) (*BackendSet, error) {
	bs, err := c.getBackendSet(ctx, loadBalancerID, name)
	if e := (*Error)(nil); IsNotFound(err) && errors.As(err, &e) {
		e.LoadBalancerMissing = c.loadBalancerMissing(ctx, loadBalancerID)
	}
	return bs, err
}

func (c *Client) getBackendSet(ctx context.Context, loadBalancerID, name string) (*BackendSet, error) {
	sdkCtx, cs := call(ctx)
	bs := &BackendSet{LoadBalancerID: loadBalancerID, Name: name}
	if IsNetworkLoadBalancer(loadBalancerID) {
		var read networkloadbalancer.BackendSet
		etag, err := readOne(sdkCtx, &c.nlb.BaseClient, "networkLoadBalancer", "GetBackendSet",
			"/networkLoadBalancers/"+loadBalancerID+"/backendSets/"+name, &read)
		if err := classify("GetBackendSet", err, cs); err != nil {
			return nil, err
		}
		bs.nlb, bs.ETag, bs.IPVersion = &read, etag, string(read.IpVersion)
		if bs.IPVersion == "" {
			bs.IPVersion = string(networkloadbalancer.IpVersionIpv4)
		}
		bs.PreservesSource = read.IsPreserveSource == nil || *read.IsPreserveSource
		nlb, err := c.readNLB(ctx, loadBalancerID)
		bs.Protocols, bs.ProtocolsUnread = nlb.protocols[name], err
		bs.Others = -1
		if err == nil {
			bs.Others = others(nlb.backends, name)
		}
		for _, b := range read.Backends {
			bs.Backends = append(bs.Backends, networkBackend(b))
		}
		return bs, nil
	}
	var read loadbalancer.BackendSet
	etag, err := readOne(sdkCtx, &c.lb.BaseClient, "loadBalancer", "GetBackendSet",
		"/loadBalancers/"+loadBalancerID+"/backendSets/"+name, &read)
	if err := classify("GetBackendSet", err, cs); err != nil {
		return nil, err
	}
	bs.lb, bs.ETag = &read, etag
	bs.Others = c.classicOthers(ctx, loadBalancerID, name)
	for _, b := range read.Backends {
		bs.Backends = append(bs.Backends, plan.Backend{
			IP: deref(b.IpAddress), Port: int32(derefInt(b.Port)), Weight: int32(derefInt(b.Weight)),
			Backup: derefBool(b.Backup), Drain: derefBool(b.Drain), Offline: derefBool(b.Offline),
		})
	}
	return bs, nil
}

// UpdateBackendSet writes backends into bs, carrying every other setting of
// the backend set (health checker, policy, SSL, session persistence, ...)
// and every field of the backends it keeps, conditional on bs's ETag. It
// returns the work request id. failed names the work request in which the
// same write failed before, if any, so that this one is a new write rather
// than a replay of the failure (see retryToken).
func (c *Client) UpdateBackendSet(ctx context.Context, bs *BackendSet, backends []plan.Backend, failed string) (string, error) {
	var ifMatch *string
	if bs.ETag != "" {
		ifMatch = &bs.ETag
	}
	update := c.updateClassic
	if bs.nlb != nil {
		update = c.updateNetwork
	}
	id, err := update(ctx, bs, backends, failed, ifMatch)
	if err != nil {
		return "", err
	}
	c.counted(bs.LoadBalancerID, bs.Name, len(backends))
	return id, nil
}

// updateNetwork is UpdateBackendSet of an NLB backend set: the backends
// kept stay where they were, with their names and targets; added ones
// follow in plan order.
func (c *Client) updateNetwork(ctx context.Context, bs *BackendSet, backends []plan.Backend, failed string, ifMatch *string) (string, error) {
	var details networkloadbalancer.UpdateBackendSetDetails
	settings := *bs.nlb
	settings.Backends = nil // set below; thousands of them are costly to copy
	if err := carry(&settings, &details); err != nil {
		return "", err
	}
	planned := make(map[string]plan.Backend, len(backends))
	for _, b := range backends {
		planned[b.Key()] = b
	}
	detail := func(o networkloadbalancer.Backend, b plan.Backend) networkloadbalancer.BackendDetails {
		d := networkloadbalancer.BackendDetails{
			Name: o.Name, TargetId: o.TargetId, Port: common.Int(int(b.Port)),
			Weight: common.Int(int(b.Weight)), IsBackup: common.Bool(b.Backup), IsDrain: common.Bool(b.Drain), IsOffline: common.Bool(b.Offline),
		}
		if b.IP != "" {
			d.IpAddress = common.String(b.IP)
		}
		if b.TargetID != "" {
			d.TargetId = common.String(b.TargetID)
		}
		return d
	}
	details.Backends = make([]networkloadbalancer.BackendDetails, 0, len(backends))
	for _, o := range bs.nlb.Backends {
		key := networkBackend(o).Key()
		if b, kept := planned[key]; kept {
			details.Backends = append(details.Backends, detail(o, b))
			delete(planned, key)
		}
	}
	for _, b := range backends {
		if _, added := planned[b.Key()]; added {
			details.Backends = append(details.Backends, detail(networkloadbalancer.Backend{}, b))
		}
	}
	token, sent := retryToken(bs, details, failed), details.Backends
	details.Backends = []networkloadbalancer.BackendDetails{}
	return sendUpdate(ctx, &c.nlb.BaseClient, "networkLoadBalancer", "/networkLoadBalancers/{networkLoadBalancerId}/backendSets/{backendSetName}",
		networkloadbalancer.UpdateBackendSetRequest{
			NetworkLoadBalancerId: &bs.LoadBalancerID, BackendSetName: &bs.Name, IfMatch: ifMatch,
			OpcRetryToken: token, UpdateBackendSetDetails: details,
		}, sent)
}

// updateClassic is UpdateBackendSet of a classic backend set, whose
// backends keep their maxConnections.
func (c *Client) updateClassic(ctx context.Context, bs *BackendSet, backends []plan.Backend, failed string, ifMatch *string) (string, error) {
	var details loadbalancer.UpdateBackendSetDetails
	settings := *bs.lb
	settings.Backends = nil // set below; thousands of them are costly to copy
	if err := carry(&settings, &details); err != nil {
		return "", err
	}
	orig := map[string]loadbalancer.Backend{}
	for _, b := range bs.lb.Backends {
		orig[plan.Key(deref(b.IpAddress), int32(derefInt(b.Port)))] = b
	}
	details.Backends = make([]loadbalancer.BackendDetails, 0, len(backends))
	for _, b := range backends {
		d := loadbalancer.BackendDetails{IpAddress: common.String(b.IP), Port: common.Int(int(b.Port))}
		if o, ok := orig[b.Key()]; ok {
			d.MaxConnections = o.MaxConnections
		}
		d.Weight = common.Int(int(b.Weight))
		d.Backup, d.Drain, d.Offline = common.Bool(b.Backup), common.Bool(b.Drain), common.Bool(b.Offline)
		details.Backends = append(details.Backends, d)
	}
	token, sent := retryToken(bs, details, failed), details.Backends
	details.Backends = []loadbalancer.BackendDetails{}
	return sendUpdate(ctx, &c.lb.BaseClient, "loadBalancer", "/loadBalancers/{loadBalancerId}/backendSets/{backendSetName}",
		loadbalancer.UpdateBackendSetRequest{
			LoadBalancerId: &bs.LoadBalancerID, BackendSetName: &bs.Name, IfMatch: ifMatch,
			OpcRetryToken: token, UpdateBackendSetDetails: details,
		}, sent)
}

// retryToken names one intended write: the same content for the same
// backend set, planned from the same read. A retry after a lost answer (a
// timeout, a 5xx) re-reads the set, which shows the old content while the
// first write's work request runs, plans the same write and so sends the
// same token, and OCI answers with that work request instead of writing
// again. The ETag read is part of it because OCI keeps tokens for 24 hours:
// the same content written again later, after other writes (a node that
// left and came back), is a new write, based on a newer ETag. So is a write
// tried again after its work request failed, which would otherwise be
// answered with the failed work request.
func retryToken(bs *BackendSet, details any, failed string) *string {
	body, err := json.Marshal(details)
	if err != nil {
		return nil // a write whose body cannot be encoded fails in the SDK anyway
	}
	token := digest([]byte(bs.LoadBalancerID), []byte(bs.Name), []byte(bs.ETag), body, []byte(failed)) // 64 characters, OCI's limit
	return &token
}

// carry copies every backend-set setting into the update details. The read
// and write shapes share their JSON field names, so a JSON round trip
// carries each setting, including ones added to the SDK later.
func carry(read, write any) error {
	raw, err := json.Marshal(read)
	if err != nil {
		return fmt.Errorf("copy backend set settings: %w", err)
	}
	if err := json.Unmarshal(raw, write); err != nil {
		return fmt.Errorf("copy backend set settings: %w", err)
	}
	return nil
}

// networkBackend is an NLB backend as planning sees it.
func networkBackend(b networkloadbalancer.Backend) plan.Backend {
	return plan.Backend{
		IP: deref(b.IpAddress), TargetID: deref(b.TargetId), Port: int32(derefInt(b.Port)), Weight: int32(derefInt(b.Weight)),
		Backup: derefBool(b.IsBackup), Drain: derefBool(b.IsDrain), Offline: derefBool(b.IsOffline),
	}
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

func derefInt(i *int) int {
	if i == nil {
		return 0
	}
	return *i
}

func derefBool(b *bool) bool { return b != nil && *b }
