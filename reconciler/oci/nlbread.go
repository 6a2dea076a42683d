package oci

import (
	"context"
	"slices"
	"sync"
	"time"

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
	r = nlbRead{at: time.Now(), protocols: map[string][]string{}, compartment: resp.CompartmentId}
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
