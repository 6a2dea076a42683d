package oci

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/oracle/oci-go-sdk/v65/networkloadbalancer"
	"sigs.k8s.io/controller-runtime/pkg/log"
)

// listenerTTL is how long an NLB's listeners, as read, stand for it:
// listeners change rarely, and backend sets are read on every reconcile.
const listenerTTL = time.Minute

// listenerCache keeps each NLB's listener protocols by backend set.
type listenerCache struct {
	mu   sync.Mutex
	read map[string]listenersRead // by NLB OCID
}

type listenersRead struct {
	at        time.Time
	protocols map[string][]string
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

// listenerProtocols maps each backend set of an NLB to the protocols its
// listeners forward there, read at most once per listenerTTL. When a read
// fails, the last one stands in, however old: listeners change rarely, and
// a backend set whose protocols are not known is held (desired.Takes).
func (c *Client) listenerProtocols(ctx context.Context, loadBalancerID string) (map[string][]string, error) {
	c.listeners.mu.Lock()
	r, ok := c.listeners.read[loadBalancerID]
	c.listeners.mu.Unlock()
	if ok && time.Since(r.at) < listenerTTL {
		return r.protocols, nil
	}
	sdkCtx, cs := call(ctx)
	resp, err := c.nlb.GetNetworkLoadBalancer(sdkCtx, networkloadbalancer.GetNetworkLoadBalancerRequest{NetworkLoadBalancerId: &loadBalancerID})
	if err := classify(opGetNetworkLoadBalancer, err, cs); err != nil {
		if ok {
			log.FromContext(ctx).V(1).Info("reading the NLB's listeners failed; the last read stands in", "loadBalancer", loadBalancerID, "readAt", r.at, "error", err.Error())
			return r.protocols, nil
		}
		return nil, err
	}
	protocols := map[string][]string{}
	for _, l := range resp.Listeners {
		set := deref(l.DefaultBackendSetName)
		protocols[set] = append(protocols[set], forwarded(l.Protocol)...)
	}
	for set, ps := range protocols {
		slices.Sort(ps)
		protocols[set] = slices.Compact(ps)
	}
	c.listeners.mu.Lock()
	c.listeners.read[loadBalancerID] = listenersRead{at: time.Now(), protocols: protocols}
	c.listeners.mu.Unlock()
	return protocols, nil
}
