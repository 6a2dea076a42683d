package ociemu

import (
	"fmt"
	"net/http"
	"net/netip"
	"slices"
	"strings"
	"time"

	"github.com/oracle/oci-go-sdk/v65/common"
	"github.com/oracle/oci-go-sdk/v65/core"
)

// Instance is a compute instance as the Core Services API (/20160918)
// shows it to a backend registrar: its compartment, and its attached VNICs
// with their private IPs. The first VNIC is the primary one, and the first
// private IP of each VNIC its primary private IP; OKE's VCN-native pod
// networking gives pods the secondary private IPs of a node's secondary
// VNICs.
type Instance struct {
	ID            string `json:"id"`
	CompartmentID string `json:"compartmentId,omitempty"`
	VNICs         []VNIC `json:"vnics"`
}

// VNIC is one VNIC attached to an Instance; IDs left empty are generated.
type VNIC struct {
	ID         string      `json:"id,omitempty"`
	SubnetID   string      `json:"subnetId,omitempty"`
	PrivateIPs []PrivateIP `json:"privateIps"`
}

// PrivateIP is one IPv4 private IP of a VNIC.
type PrivateIP struct {
	ID        string `json:"id,omitempty"`
	IPAddress string `json:"ipAddress"`
}

// privateIPRecord is a private IP with where it is attached.
type privateIPRecord struct {
	PrivateIP
	vnic, subnet, compartment string
	primary                   bool
}

// compute is the emulator's Core Services state; its own lock, taken
// after e.mu where both are locked, lets the backend rules (under e.mu) look
// private IPs up.
type compute struct {
	instances  map[string]*Instance        // by OCID
	privateIPs map[string]*privateIPRecord // by OCID
}

func (e *Emulator) registerCompute(mux *http.ServeMux) {
	e.route(mux, "GET /20160918/instances/{instanceId}", "GetInstance", false, e.getInstance)
	e.route(mux, "GET /20160918/vnicAttachments", "ListVnicAttachments", false, e.listVnicAttachments)
	e.route(mux, "GET /20160918/privateIps", "ListPrivateIps", false, e.listPrivateIps)
}

// seedInstances adds instances, replacing any with the same OCID, and
// gives their VNICs and private IPs OCIDs where they have none.
func (e *Emulator) seedInstances(instances []Instance) error {
	prepared := make([]*Instance, 0, len(instances))
	for i, in := range instances {
		in := copyJSON(in)
		if !strings.HasPrefix(in.ID, "ocid1.instance.") {
			return fmt.Errorf("instances[%d].id %q is not an instance OCID (ocid1.instance...)", i, in.ID)
		}
		if in.CompartmentID == "" {
			in.CompartmentID = defaultCompartment
		}
		if len(in.VNICs) == 0 {
			return fmt.Errorf("instances[%d]: an instance has at least its primary VNIC", i)
		}
		for j := range in.VNICs {
			v := &in.VNICs[j]
			if v.ID == "" {
				v.ID = newOCID("vnic", e.opts.Region)
			}
			if v.SubnetID == "" {
				v.SubnetID = "ocid1.subnet.oc1..emulatorsubnet"
			}
			if len(v.PrivateIPs) == 0 {
				return fmt.Errorf("instances[%d].vnics[%d]: a VNIC has at least its primary private IP", i, j)
			}
			for k := range v.PrivateIPs {
				p := &v.PrivateIPs[k]
				if addr, err := netip.ParseAddr(p.IPAddress); err != nil || !addr.Is4() {
					return fmt.Errorf("instances[%d].vnics[%d].privateIps[%d].ipAddress %q is not an IPv4 address", i, j, k, p.IPAddress)
				}
				if p.ID == "" {
					p.ID = newOCID("privateip", e.opts.Region)
				}
			}
		}
		prepared = append(prepared, &in)
	}
	e.computeMu.Lock()
	defer e.computeMu.Unlock()
	for _, in := range prepared {
		if old := e.compute.instances[in.ID]; old != nil {
			for _, v := range old.VNICs {
				for _, p := range v.PrivateIPs {
					delete(e.compute.privateIPs, p.ID)
				}
			}
		}
		e.compute.instances[in.ID] = in
		for _, v := range in.VNICs {
			for k, p := range v.PrivateIPs {
				e.compute.privateIPs[p.ID] = &privateIPRecord{PrivateIP: p, vnic: v.ID, subnet: v.SubnetID, compartment: in.CompartmentID, primary: k == 0}
			}
		}
	}
	return nil
}

// privateIP is the private IP of OCID id, or nil.
func (e *Emulator) privateIP(id string) *privateIPRecord {
	e.computeMu.RLock()
	defer e.computeMu.RUnlock()
	return e.compute.privateIPs[id]
}

// Instances returns a copy of every seeded instance, sorted by OCID.
func (e *Emulator) Instances() []Instance {
	e.computeMu.RLock()
	defer e.computeMu.RUnlock()
	var out []Instance
	for _, id := range sortedKeys(e.compute.instances) {
		out = append(out, copyJSON(*e.compute.instances[id]))
	}
	return out
}

func (e *Emulator) getInstance(rc *requestContext) (*response, error) {
	id := rc.r.PathValue("instanceId")
	e.computeMu.RLock()
	defer e.computeMu.RUnlock()
	in := e.compute.instances[id]
	if in == nil {
		return nil, notFound("instance " + id)
	}
	return answer(core.Instance{
		Id: common.String(in.ID), CompartmentId: common.String(in.CompartmentID),
		AvailabilityDomain: common.String("AD-1"), Region: common.String(e.opts.Region), Shape: common.String("VM.Standard.E4.Flex"),
		LifecycleState: core.InstanceLifecycleStateRunning, TimeCreated: &common.SDKTime{Time: time.Unix(0, 0).UTC()},
	}, "")
}

// listVnicAttachments lists the attachments of a compartment's instances
// (compartmentId is mandatory: SDK ListVnicAttachmentsRequest), of one
// instance when instanceId is given.
func (e *Emulator) listVnicAttachments(rc *requestContext) (*response, error) {
	q := rc.r.URL.Query()
	compartment, instance := q.Get("compartmentId"), q.Get("instanceId")
	if compartment == "" {
		return nil, invalidParameter("compartmentId is required")
	}
	e.computeMu.RLock()
	items := []core.VnicAttachment{}
	for _, id := range sortedKeys(e.compute.instances) {
		in := e.compute.instances[id]
		if in.CompartmentID != compartment || instance != "" && id != instance {
			continue
		}
		for j, v := range in.VNICs {
			items = append(items, core.VnicAttachment{
				Id: common.String(strings.Replace(v.ID, ".vnic.", ".vnicattachment.", 1)), InstanceId: common.String(in.ID),
				VnicId: common.String(v.ID), SubnetId: common.String(v.SubnetID), CompartmentId: common.String(in.CompartmentID),
				AvailabilityDomain: common.String("AD-1"), LifecycleState: core.VnicAttachmentLifecycleStateAttached,
				NicIndex: common.Int(0), VlanTag: common.Int(j), TimeCreated: &common.SDKTime{Time: time.Unix(0, 0).UTC()},
			})
		}
	}
	e.computeMu.RUnlock()
	page, next, err := paginate(rc, items)
	if err != nil {
		return nil, err
	}
	return &response{status: http.StatusOK, body: page, nextPage: next}, nil
}

// listPrivateIps lists private IPs by one of the filters OCI takes (SDK
// ListPrivateIpsRequest: a VNIC, a subnet, or an address and its subnet);
// a request with none is refused, the stricter reading of "based on one of
// these filters".
func (e *Emulator) listPrivateIps(rc *requestContext) (*response, error) {
	q := rc.r.URL.Query()
	vnic, subnet, address := q.Get("vnicId"), q.Get("subnetId"), q.Get("ipAddress")
	if vnic == "" && subnet == "" {
		return nil, invalidParameter("one of vnicId, subnetId, or ipAddress with subnetId is required")
	}
	e.computeMu.RLock()
	var found []*privateIPRecord
	for _, p := range e.compute.privateIPs {
		if vnic != "" && p.vnic != vnic || subnet != "" && p.subnet != subnet || address != "" && p.IPAddress != address {
			continue
		}
		found = append(found, p)
	}
	e.computeMu.RUnlock()
	slices.SortFunc(found, func(a, b *privateIPRecord) int { return strings.Compare(a.ID, b.ID) })
	items := make([]core.PrivateIp, 0, len(found))
	for _, p := range found {
		items = append(items, core.PrivateIp{
			Id: common.String(p.ID), IpAddress: common.String(p.IPAddress), VnicId: common.String(p.vnic),
			SubnetId: common.String(p.subnet), CompartmentId: common.String(p.compartment), IsPrimary: common.Bool(p.primary),
		})
	}
	page, next, err := paginate(rc, items)
	if err != nil {
		return nil, err
	}
	return &response{status: http.StatusOK, body: page, nextPage: next}, nil
}
