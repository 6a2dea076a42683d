package oci

import (
	"context"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/oracle/oci-go-sdk/v65/loadbalancer"
	"github.com/oracle/oci-go-sdk/v65/networkloadbalancer"
	"sigs.k8s.io/controller-runtime/pkg/log"
)

// nlbTTL is how long an NLB's read stands for it: its listeners and its
// compartment change rarely, while its backend sets are read on every
// reconcile and its work requests listed every watch period.
const nlbTTL = time.Minute

// nlbCache keeps what the NLBs' reads say that their backend sets and work
// requests are read by: the listener protocols by backend set, and the
// compartment.
type nlbCache struct {
	mu   sync.Mutex
	read map[string]nlbRead // by NLB OCID
}

type nlbRead struct {
	at          time.Time
	protocols   map[string][]string
	compartment *string
	// backends counts each backend set's backends, for the NLB's limit
	// in all (BackendSet.Others).
	backends map[string]int
}

// others are the backends of the backend sets other than name, as read.
func others(counts map[string]int, name string) int {
	n := 0
	for set, c := range counts {
		if set != name {
			n += c
		}
	}
	return n
}

// forwarded are the protocols a listener forwards to its default backend
// set (SDK ListenerProtocolsEnum): TCP, UDP, or both for TCP_AND_UDP and
// for ANY and L3IP, which forward every protocol.
func forwarded(p networkloadbalancer.ListenerProtocolsEnum) []string {
	switch p {
	case networkloadbalancer.ListenerProtocolsTcp:
		return []string{"TCP"}
	case networkloadbalancer.ListenerProtocolsUdp:
		return []string{"UDP"}
	default:
		return []string{"TCP", "UDP"}
	}
}

// readNLB reads an NLB with GetNetworkLoadBalancer at most once per
// nlbTTL. When a read fails, the last one stands in, however old: what it
// says changes rarely, and a backend set whose protocols are not known is
// held (desired.Takes).
func (c *Client) readNLB(ctx context.Context, loadBalancerID string) (nlbRead, error) {
	c.nlbs.mu.Lock()
	r, ok := c.nlbs.read[loadBalancerID]
	c.nlbs.mu.Unlock()
	if ok && time.Since(r.at) < nlbTTL {
		return r, nil
	}
	sdkCtx, cs := call(ctx)
	resp, err := c.nlb.GetNetworkLoadBalancer(sdkCtx, networkloadbalancer.GetNetworkLoadBalancerRequest{NetworkLoadBalancerId: &loadBalancerID})
	if err := classify(opGetNetworkLoadBalancer, err, cs); err != nil {
		if ok {
			log.FromContext(ctx).V(1).Info("reading the NLB failed; the last read stands in", "loadBalancer", loadBalancerID, "readAt", r.at, "error", err.Error())
			return r, nil
		}
		return nlbRead{}, err
	}
	r = nlbRead{at: time.Now(), protocols: map[string][]string{}, compartment: resp.CompartmentId, backends: map[string]int{}}
	for name, set := range resp.BackendSets {
		r.backends[name] = len(set.Backends)
	}
	for _, l := range resp.Listeners {
		set := deref(l.DefaultBackendSetName)
		r.protocols[set] = append(r.protocols[set], forwarded(l.Protocol)...)
	}
	for set, ps := range r.protocols {
		slices.Sort(ps)
		r.protocols[set] = slices.Compact(ps)
	}
	c.nlbs.mu.Lock()
	c.nlbs.read[loadBalancerID] = r
	c.nlbs.mu.Unlock()
	return r, nil
}

// classicCache keeps, for each classic load balancer, how many backends
// each of its backend sets had at its last read (GetLoadBalancer, at most
// once per nlbTTL), for its limit in all.
type classicCache struct {
	mu   sync.Mutex
	read map[string]classicRead // by load balancer OCID
}

type classicRead struct {
	at       time.Time
	backends map[string]int
}

// classicOthers are the backends of the classic load balancer's backend
// sets other than name, as last read; -1 when it was never read.
func (c *Client) classicOthers(ctx context.Context, loadBalancerID, name string) int {
	r, err := c.readClassic(ctx, loadBalancerID)
	if err != nil {
		return -1
	}
	return others(r.backends, name)
}

// readClassic reads a classic load balancer with GetLoadBalancer at most
// once per nlbTTL. When a read fails, the last one stands in, however old,
// as for an NLB (readNLB).
func (c *Client) readClassic(ctx context.Context, loadBalancerID string) (classicRead, error) {
	c.classics.mu.Lock()
	r, ok := c.classics.read[loadBalancerID]
	c.classics.mu.Unlock()
	if ok && time.Since(r.at) < nlbTTL {
		return r, nil
	}
	sdkCtx, cs := call(ctx)
	resp, err := c.lb.GetLoadBalancer(sdkCtx, loadbalancer.GetLoadBalancerRequest{LoadBalancerId: &loadBalancerID})
	if err := classify("GetLoadBalancer", err, cs); err != nil {
		if ok {
			log.FromContext(ctx).V(1).Info("reading the load balancer failed; the last read stands in", "loadBalancer", loadBalancerID, "readAt", r.at, "error", err.Error())
			return r, nil
		}
		return classicRead{}, err
	}
	r = classicRead{at: time.Now(), backends: map[string]int{}}
	for set, bs := range resp.BackendSets {
		r.backends[set] = len(bs.Backends)
	}
	c.classics.mu.Lock()
	c.classics.read[loadBalancerID] = r
	c.classics.mu.Unlock()
	return r, nil
}

// loadBalancerMissing reports whether the load balancer itself answers 404
// NotAuthorizedOrNotFound: it does not exist, or the identity may not read
// it, which OCI does not tell apart.
func (c *Client) loadBalancerMissing(ctx context.Context, loadBalancerID string) bool {
	var err error
	if IsNetworkLoadBalancer(loadBalancerID) {
		_, err = c.readNLB(ctx, loadBalancerID)
	} else {
		_, err = c.readClassic(ctx, loadBalancerID)
	}
	return IsNotFound(err)
}

// counted records that a write accepted leaves set with n backends, in
// the load balancer's last read, so that the room its limit leaves others
// is known before the next read.
func (c *Client) counted(loadBalancerID, set string, n int) {
	recount := func(counts map[string]int) map[string]int {
		out := maps.Clone(counts) // a read's map may be in use
		if out == nil {
			out = map[string]int{}
		}
		out[set] = n
		return out
	}
	if IsNetworkLoadBalancer(loadBalancerID) {
		c.nlbs.mu.Lock()
		defer c.nlbs.mu.Unlock()
		if r, ok := c.nlbs.read[loadBalancerID]; ok {
			r.backends = recount(r.backends)
			c.nlbs.read[loadBalancerID] = r
		}
		return
	}
	c.classics.mu.Lock()
	defer c.classics.mu.Unlock()
	if r, ok := c.classics.read[loadBalancerID]; ok {
		r.backends = recount(r.backends)
		c.classics.read[loadBalancerID] = r
	}
}
