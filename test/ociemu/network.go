package ociemu

import (
	"net/http"
	"net/netip"
	"slices"
	"strconv"
	"strings"

	"github.com/oracle/oci-go-sdk/v65/common"
	"github.com/oracle/oci-go-sdk/v65/networkloadbalancer"
)

// registerNetwork serves the Network Load Balancer API.
func (e *Emulator) registerNetwork(mux *http.ServeMux) {
	const nlb = "/20200501/networkLoadBalancers/{networkLoadBalancerId}"
	const set = nlb + "/backendSets/{backendSetName}"
	e.route(mux, "GET "+nlb, "GetNetworkLoadBalancer", false, e.networkGetLoadBalancer)
	e.route(mux, "GET "+nlb+"/backendSets", "ListBackendSets", false, e.networkListBackendSets)
	e.route(mux, "GET "+set, "GetBackendSet", false, e.networkGetBackendSet)
	e.route(mux, "PUT "+set, "UpdateBackendSet", true, e.networkUpdateBackendSet)
	e.route(mux, "GET "+set+"/health", "GetBackendSetHealth", false, e.networkGetBackendSetHealth)
	e.route(mux, "GET "+set+"/backends", "ListBackends", false, e.networkListBackends)
	e.route(mux, "POST "+set+"/backends", "CreateBackend", true, e.networkCreateBackend)
	e.route(mux, "GET "+set+"/backends/{backendName}", "GetBackend", false, e.networkGetBackend)
	e.route(mux, "GET "+set+"/backends/{backendName}/health", "GetBackendHealth", false, e.networkGetBackendHealth)
	e.route(mux, "PUT "+set+"/backends/{backendName}", "UpdateBackend", true, e.networkUpdateBackend)
	e.route(mux, "DELETE "+set+"/backends/{backendName}", "DeleteBackend", true, e.networkDeleteBackend)
	e.route(mux, "GET /20200501/workRequests/{workRequestId}", "GetWorkRequest", false, e.networkGetWorkRequest)
	e.route(mux, "GET /20200501/workRequests", "ListWorkRequests", false, e.networkListWorkRequests)
	e.route(mux, "GET /20200501/workRequests/{workRequestId}/errors", "ListWorkRequestErrors", false, e.networkListWorkRequestErrors)
}

// readAnswer is a GET's answer with the etag, or 304 when If-None-Match
// names the current etag.
func readAnswer(rc *requestContext, body any, etag string) (*response, error) {
	if inm := rc.header("if-none-match"); inm != "" && inm == etag {
		return &response{status: http.StatusNotModified, etag: etag}, nil
	}
	return answer(body, etag)
}

func (e *Emulator) networkGetLoadBalancer(rc *requestContext) (*response, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	b, err := networkFamily.balancer(e, rc.loadBalancerID)
	if err != nil {
		return nil, err
	}
	return readAnswer(rc, *b.network, b.etag())
}

func (e *Emulator) networkListBackendSets(rc *requestContext) (*response, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	b, err := networkFamily.balancer(e, rc.loadBalancerID)
	if err != nil {
		return nil, err
	}
	items := []networkloadbalancer.BackendSetSummary{}
	for _, name := range sortedKeys(b.network.BackendSets) {
		s := copyJSON(b.network.BackendSets[name])
		items = append(items, networkloadbalancer.BackendSetSummary{
			Name: s.Name, Policy: s.Policy, Backends: s.Backends, HealthChecker: s.HealthChecker,
			IsPreserveSource: s.IsPreserveSource, IsFailOpen: s.IsFailOpen, IsInstantFailoverEnabled: s.IsInstantFailoverEnabled,
			IsInstantFailoverTcpResetEnabled:        s.IsInstantFailoverTcpResetEnabled,
			AreOperationallyActiveBackendsPreferred: s.AreOperationallyActiveBackendsPreferred, IpVersion: s.IpVersion,
		})
	}
	page, next, err := paginate(rc, items)
	if err != nil {
		return nil, err
	}
	return &response{status: http.StatusOK, body: networkloadbalancer.BackendSetCollection{Items: page}, nextPage: next}, nil
}

func (e *Emulator) networkGetBackendSet(rc *requestContext) (*response, error) {
	name := rc.r.PathValue("backendSetName")
	e.mu.Lock()
	defer e.mu.Unlock()
	b, set, err := networkFamily.backendSet(e, rc.loadBalancerID, name)
	if err != nil {
		return nil, err
	}
	return readAnswer(rc, set, networkFamily.etag(b, name))
}

var networkPolicies = []string{"TWO_TUPLE", "THREE_TUPLE", "FIVE_TUPLE"}

// networkUpdateBackendSet replaces a backend set: a PUT, so whatever the
// request leaves out is left unset, the backends and health checker too.
// Every field of the request is optional.
func (e *Emulator) networkUpdateBackendSet(rc *requestContext) (*response, error) {
	var d networkloadbalancer.UpdateBackendSetDetails
	if err := rc.decode(&d); err != nil {
		return nil, err
	}
	name := rc.r.PathValue("backendSetName")
	e.mu.Lock()
	defer e.mu.Unlock()
	b, _, err := networkFamily.backendSet(e, rc.loadBalancerID, name)
	if err != nil {
		return nil, err
	}
	if d.Policy != nil && !slices.Contains(networkPolicies, *d.Policy) {
		return nil, invalidParameter("policy " + *d.Policy + " is not one of TWO_TUPLE, THREE_TUPLE, FIVE_TUPLE")
	}
	if hc := d.HealthChecker; hc != nil {
		if _, ok := networkloadbalancer.GetMappingHealthCheckProtocolsEnum(string(hc.Protocol)); !ok {
			return nil, invalidParameter("healthChecker.protocol " + string(hc.Protocol) + " is not valid")
		}
	}
	settings := d
	settings.Backends = nil // converted one by one below
	updated := convertJSON[networkloadbalancer.BackendSet](settings)
	updated.Name = common.String(name)
	updated.Backends = []networkloadbalancer.Backend{}
	var seen backendIdentities
	// Converted at once: one JSON round trip per backend costs more than
	// the rest of a write of thousands.
	for i, be := range convertJSON[[]networkloadbalancer.Backend](d.Backends) {
		be, err := networkBackend(be)
		if err == nil {
			err = e.admissible(b, &updated, be)
		}
		if err == nil && seen.add(be) {
			err = invalidParameter("Duplicate backend IP/id + port combinations not allowed: " + *be.Name)
		}
		if err != nil {
			return nil, invalidParameter("backends[" + itoa(i) + "]: " + err.message)
		}
		updated.Backends = append(updated.Backends, be)
	}
	if err := networkFamily.admits(b, name, updated, e.opts.BackendsPerBackendSet); err != nil {
		return nil, err
	}
	return networkFamily.submitChange(e, rc, b, "UpdateBackendSet", name, func(s *networkloadbalancer.BackendSet) { *s = updated })
}

// networkBackend validates a backend and fills in its name and defaults.
// The name, when not given, is ip:port or targetId:port; a given name is
// kept, so names survive a client carrying them through UpdateBackendSet.
func networkBackend(be networkloadbalancer.Backend) (networkloadbalancer.Backend, *apiError) {
	if be.Port == nil {
		return be, invalidParameter("port is required")
	}
	if deref(be.IpAddress) == "" && deref(be.TargetId) == "" {
		return be, invalidParameter("ipAddress or targetId is required")
	}
	if be.Name == nil {
		be.Name = common.String(networkBackendName(be.IpAddress, be.TargetId, *be.Port))
	}
	be.Weight = orDefault(be.Weight, 1)
	be.IsDrain = orDefault(be.IsDrain, false)
	be.IsBackup = orDefault(be.IsBackup, false)
	be.IsOffline = orDefault(be.IsOffline, false)
	if err := backendRules(be.Weight, nil); err != nil {
		return be, err
	}
	return be, networkBackendPortRule(*be.Port)
}

func (e *Emulator) networkListBackends(rc *requestContext) (*response, error) {
	name := rc.r.PathValue("backendSetName")
	e.mu.Lock()
	defer e.mu.Unlock()
	_, set, err := networkFamily.backendSet(e, rc.loadBalancerID, name)
	if err != nil {
		return nil, err
	}
	items := []networkloadbalancer.BackendSummary{}
	for _, be := range copyJSON(set.Backends) {
		items = append(items, networkloadbalancer.BackendSummary(be))
	}
	page, next, err := paginate(rc, items)
	if err != nil {
		return nil, err
	}
	return &response{status: http.StatusOK, body: networkloadbalancer.BackendCollection{Items: page}, nextPage: next}, nil
}

func (e *Emulator) networkGetBackend(rc *requestContext) (*response, error) {
	name, backend := rc.r.PathValue("backendSetName"), rc.r.PathValue("backendName")
	e.mu.Lock()
	defer e.mu.Unlock()
	b, set, err := networkFamily.backendSet(e, rc.loadBalancerID, name)
	if err != nil {
		return nil, err
	}
	i := networkFamily.backendIndex(set, backend)
	if i < 0 {
		return nil, notFound("backend " + backend)
	}
	return readAnswer(rc, set.Backends[i], networkFamily.etag(b, name))
}

func (e *Emulator) networkCreateBackend(rc *requestContext) (*response, error) {
	var d networkloadbalancer.CreateBackendDetails
	if err := rc.decode(&d); err != nil {
		return nil, err
	}
	name := rc.r.PathValue("backendSetName")
	e.mu.Lock()
	defer e.mu.Unlock()
	b, set, err := networkFamily.backendSet(e, rc.loadBalancerID, name)
	if err != nil {
		return nil, err
	}
	be, err := networkBackend(convertJSON[networkloadbalancer.Backend](d))
	if err == nil {
		err = e.admissible(b, &set, be)
	}
	if err != nil {
		return nil, err
	}
	var seen backendIdentities
	for _, o := range set.Backends {
		seen.add(o)
	}
	if networkFamily.backendIndex(set, *be.Name) >= 0 || seen.add(be) {
		return nil, alreadyExists("Duplicate backend IP/id + port combinations not allowed: " + *be.Name)
	}
	return networkFamily.addBackend(e, rc, b, name, be)
}

// admissible checks a backend against its backend set and load balancer:
// its address must be of the backend set's IP version (IPv4 when unset),
// a network load balancer preserving source and destination headers
// takes backends only by target (targetId), and so does, for IPv4, a
// backend set preserving the client's source address.
//
// A targetId that is an instance OCID names the instance's primary VNIC's
// IPv4 address; one that is a private IP OCID names that private IP (SDK
// Backend.TargetId: "The IP OCID/Instance OCID associated with the
// backend server"; Oracle's cloud controller manager sends an instance
// only with an IPv4 backend, and IPv6 backends by address alone:
// load_balancer_spec.go getBackends). The sources do not say what OCI
// does with an instance in an IPv6 backend set, so the stricter reading:
// refused, as naming an address of another version.
//
// A backend set with isPreserveSource (true when unset, as OCI documents
// it) has its backends selected by instance: "If enabled, the compute
// instance selects the backend servers. Otherwise, you can add the
// backend servers using IP addresses" (OCI docs, Enabling Network Load
// Balancer Backend Set Source Preservation). Public reports differ on
// what OCI does with an address alone there (oracle/terraform-provider-oci
// #1427: taken, and the traffic lost), so the stricter reading: an IPv4
// backend without a targetId is refused. IPv6 backends go by address, as
// Oracle's cloud controller manager registers them in such sets.
func (e *Emulator) admissible(b *balancer, set *networkloadbalancer.BackendSet, be networkloadbalancer.Backend) *apiError {
	target := deref(be.TargetId)
	if deref(b.network.IsPreserveSourceDestination) && target == "" {
		return invalidParameter("backend " + *be.Name + ": a network load balancer that preserves source and destination takes backends by instance (targetId) only")
	}
	want := networkloadbalancer.IpVersionIpv4
	if set.IpVersion != "" {
		want = set.IpVersion
	}
	if target == "" && want == networkloadbalancer.IpVersionIpv4 && deref(orDefault(set.IsPreserveSource, true)) {
		return invalidParameter("backend " + *be.Name + ": backend set " + deref(set.Name) + " preserves the client's source address (isPreserveSource), so the compute instance selects its backends: give targetId, an instance or private IP OCID")
	}
	switch {
	case strings.HasPrefix(target, "ocid1.instance.") && want == networkloadbalancer.IpVersionIpv6:
		return invalidParameter("backend " + *be.Name + ": targetId " + target + " names the instance's primary IPv4 address, not one of the backend set's IP version " + string(want))
	case strings.HasPrefix(target, "ocid1.privateip."):
		if err := e.privateIPTarget(target, be, want); err != nil {
			return err
		}
	}
	ip := deref(be.IpAddress)
	if ip == "" {
		return nil
	}
	addr, err := netip.ParseAddr(ip)
	if err != nil {
		return invalidParameter("backend " + *be.Name + ": ipAddress " + ip + " is not an IP address")
	}
	if is6 := addr.Is6() && !addr.Is4In6(); is6 != (want == networkloadbalancer.IpVersionIpv6) {
		return invalidParameter("backend " + *be.Name + ": ipAddress " + ip + " is not of the backend set's IP version " + string(want))
	}
	return nil
}

// privateIPTarget checks a targetId naming a private IP: it must be one
// the emulator has (Instances), IPv4 (a privateIp is "an IPv4 private
// IP address": SDK core.PrivateIp) in an IPv4 backend set, and the
// backend's address, when it gives one, must be that private IP's. The
// sources say nothing of a mismatch or an unknown OCID: the stricter
// reading, refused.
func (e *Emulator) privateIPTarget(target string, be networkloadbalancer.Backend, want networkloadbalancer.IpVersionEnum) *apiError {
	p := e.privateIP(target)
	switch {
	case p == nil:
		return invalidParameter("backend " + *be.Name + ": targetId " + target + " names no private IP")
	case want == networkloadbalancer.IpVersionIpv6:
		return invalidParameter("backend " + *be.Name + ": targetId " + target + " names an IPv4 private IP, not one of the backend set's IP version " + string(want))
	}
	if ip := deref(be.IpAddress); ip != "" {
		if addr, err := netip.ParseAddr(ip); err == nil && addr.Unmap().String() != p.IPAddress {
			return invalidParameter("backend " + *be.Name + ": ipAddress " + ip + " is not the address of private IP " + target + " (" + p.IPAddress + ")")
		}
	}
	return nil
}

// backendIdentities are the ways backends of an NLB backend set are told
// apart: by address and port, and by instance and port. Addresses are
// compared as addresses, however their text is written.
type backendIdentities map[string]bool

// add records be and reports whether a backend already recorded has one
// of its identities.
func (ids *backendIdentities) add(be networkloadbalancer.Backend) bool {
	if *ids == nil {
		*ids = backendIdentities{}
	}
	port := strconv.Itoa(deref(be.Port))
	var keys []string
	if ip := deref(be.IpAddress); ip != "" {
		if addr, err := netip.ParseAddr(ip); err == nil {
			ip = addr.Unmap().String()
		}
		keys = append(keys, "ip "+ip+" "+port)
	}
	if target := deref(be.TargetId); target != "" {
		keys = append(keys, "target "+target+" "+port)
	}
	duplicate := false
	for _, k := range keys {
		duplicate = duplicate || (*ids)[k]
		(*ids)[k] = true
	}
	return duplicate
}

// networkUpdateBackend changes only the fields the request sets.
func (e *Emulator) networkUpdateBackend(rc *requestContext) (*response, error) {
	var d networkloadbalancer.UpdateBackendDetails
	if err := rc.decode(&d); err != nil {
		return nil, err
	}
	if err := backendRules(d.Weight, nil); err != nil {
		return nil, err
	}
	// OCI docs, Backend Sets for Network Load Balancers: "You can't edit a
	// backend server that's part of a non-preemptive mode backend set".
	set, err := networkFamily.requestedSet(e, rc)
	if err == nil && deref(set.AreOperationallyActiveBackendsPreferred) {
		err = invalidParameter("a backend of a non-preemptive backend set cannot be edited")
	}
	if err != nil {
		return nil, err
	}
	return networkFamily.changeBackend(e, rc, "UpdateBackend", func(be *networkloadbalancer.Backend) bool {
		be.Weight = orDefault(d.Weight, *be.Weight)
		be.IsBackup = orDefault(d.IsBackup, *be.IsBackup)
		be.IsDrain = orDefault(d.IsDrain, *be.IsDrain)
		be.IsOffline = orDefault(d.IsOffline, *be.IsOffline)
		return true
	})
}

func (e *Emulator) networkDeleteBackend(rc *requestContext) (*response, error) {
	return networkFamily.changeBackend(e, rc, "DeleteBackend", func(*networkloadbalancer.Backend) bool { return false })
}

func (e *Emulator) networkGetWorkRequest(rc *requestContext) (*response, error) {
	id := rc.r.PathValue("workRequestId")
	e.mu.Lock()
	defer e.mu.Unlock()
	w := e.workRequests[id]
	if w == nil || w.balancer.network == nil {
		return nil, notFound("work request " + id)
	}
	return &response{status: http.StatusOK, body: w.networkView()}, nil
}

// networkListWorkRequestErrors lists why an NLB work request failed; the
// SDK requires the compartment, as it does for ListWorkRequests.
func (e *Emulator) networkListWorkRequestErrors(rc *requestContext) (*response, error) {
	id := rc.r.PathValue("workRequestId")
	if rc.r.URL.Query().Get("compartmentId") == "" {
		return nil, invalidParameter("compartmentId is required")
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	w := e.workRequests[id]
	if w == nil || w.balancer.network == nil || w.balancer.compartment() != rc.r.URL.Query().Get("compartmentId") {
		return nil, notFound("work request " + id)
	}
	page, next, err := paginate(rc, w.networkErrors())
	if err != nil {
		return nil, err
	}
	return &response{status: http.StatusOK, body: networkloadbalancer.WorkRequestErrorCollection{Items: page}, nextPage: next}, nil
}

// networkListWorkRequests lists a compartment's NLB work requests, oldest
// first (see listed).
func (e *Emulator) networkListWorkRequests(rc *requestContext) (*response, error) {
	compartment := rc.r.URL.Query().Get("compartmentId")
	if compartment == "" {
		return nil, invalidParameter("compartmentId is required")
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	items := []networkloadbalancer.WorkRequestSummary{}
	for _, w := range e.listed(nil) {
		if w.balancer.network != nil && w.balancer.compartment() == compartment {
			items = append(items, w.networkSummary())
		}
	}
	page, next, err := paginate(rc, items)
	if err != nil {
		return nil, err
	}
	return &response{status: http.StatusOK, body: networkloadbalancer.WorkRequestCollection{Items: page}, nextPage: next}, nil
}
