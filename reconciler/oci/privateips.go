package oci

import (
	"context"
	"net/netip"
	"sync"
	"time"

	"github.com/oracle/oci-go-sdk/v65/core"
)

// PrivateIPs are the private IP OCIDs of an instance's attached VNICs, by
// IPv4 address: a backend set that preserves the client's source takes a
// pod by its private IP's OCID (OKE's VCN-native pod networking gives pods
// the secondary private IPs of their node's secondary VNICs).
type PrivateIPs map[netip.Addr]string

// privateIPsFresh is how long a listing of an instance's private IPs is
// used; privateIPsRelist is how soon it is listed again when an address
// asked for is not in it (a pod given an address the listing predates).
// OKE's CNI assigns a node's pod addresses when the node joins, so the
// listing seldom changes; the bounds keep an address that is no private IP
// of the node from costing a listing on every reconcile.
const (
	privateIPsFresh  = 5 * time.Minute
	privateIPsRelist = 15 * time.Second
)

// privateIPCache keeps each instance's compartment (which never changes)
// and its last listing.
type privateIPCache struct {
	mu sync.Mutex
	by map[string]*instanceIPs
}

type instanceIPs struct {
	compartment string
	ips         PrivateIPs
	listedAt    time.Time
}

// PrivateIPs lists the private IPs of instanceID's attached VNICs, as
// Oracle's cloud controller manager finds an instance's VNICs
// (GetInstance for its compartment, ListVnicAttachments of the instance,
// then ListPrivateIps of each VNIC: pkg/oci/client compute.go
// GetSecondaryVNICsForInstance, networking.go ListPrivateIps). A listing
// is reused while it is fresh and has every address of want; the
// identity needs to read instances, vnic-attachments and private-ips.
func (c *Client) PrivateIPs(ctx context.Context, instanceID string, want []netip.Addr) (PrivateIPs, error) {
	now := time.Now()
	c.privateIPs.mu.Lock()
	cached := c.privateIPs.by[instanceID]
	c.privateIPs.mu.Unlock()
	if cached != nil && cached.ips != nil && usable(cached, want, now) {
		return cached.ips, nil
	}
	compartment := ""
	if cached != nil {
		compartment = cached.compartment
	}
	if compartment == "" {
		sdkCtx, cs := call(ctx)
		resp, err := c.compute.GetInstance(sdkCtx, core.GetInstanceRequest{InstanceId: &instanceID})
		if err := classify("GetInstance", err, cs); err != nil {
			return nil, err
		}
		compartment = deref(resp.CompartmentId)
	}
	ips, err := c.listPrivateIPs(ctx, compartment, instanceID)
	if err != nil {
		return nil, err
	}
	c.privateIPs.mu.Lock()
	defer c.privateIPs.mu.Unlock()
	if c.privateIPs.by == nil || len(c.privateIPs.by) >= maxCachedInstances {
		c.privateIPs.by = map[string]*instanceIPs{}
	}
	c.privateIPs.by[instanceID] = &instanceIPs{compartment: compartment, ips: ips, listedAt: now}
	return ips, nil
}

// maxCachedInstances bounds the cache; a cluster's nodes come and go.
const maxCachedInstances = 4096

// usable reports whether listing cached, taken at its listedAt, may answer
// for want at now.
func usable(cached *instanceIPs, want []netip.Addr, now time.Time) bool {
	age := now.Sub(cached.listedAt)
	if age >= privateIPsFresh {
		return false
	}
	if age < privateIPsRelist {
		return true
	}
	for _, a := range want {
		if _, ok := cached.ips[a]; !ok {
			return false
		}
	}
	return true
}

// listPrivateIPs lists the private IPs of every VNIC attached to the
// instance, every page of each list.
func (c *Client) listPrivateIPs(ctx context.Context, compartment, instanceID string) (PrivateIPs, error) {
	var vnics []string
	for page := (*string)(nil); ; {
		sdkCtx, cs := call(ctx)
		resp, err := c.compute.ListVnicAttachments(sdkCtx, core.ListVnicAttachmentsRequest{CompartmentId: &compartment, InstanceId: &instanceID, Page: page})
		if err := classify("ListVnicAttachments", err, cs); err != nil {
			return nil, err
		}
		for _, a := range resp.Items {
			if a.LifecycleState == core.VnicAttachmentLifecycleStateAttached && a.VnicId != nil {
				vnics = append(vnics, *a.VnicId)
			}
		}
		if page = resp.OpcNextPage; page == nil {
			break
		}
	}
	ips := PrivateIPs{}
	for _, vnic := range vnics {
		for page := (*string)(nil); ; {
			sdkCtx, cs := call(ctx)
			resp, err := c.network.ListPrivateIps(sdkCtx, core.ListPrivateIpsRequest{VnicId: &vnic, Page: page})
			if err := classify("ListPrivateIps", err, cs); err != nil {
				return nil, err
			}
			for _, p := range resp.Items {
				if addr, err := netip.ParseAddr(deref(p.IpAddress)); err == nil && p.Id != nil {
					ips[addr.Unmap()] = *p.Id
				}
			}
			if page = resp.OpcNextPage; page == nil {
				break
			}
		}
	}
	return ips, nil
}
