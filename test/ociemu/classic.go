package ociemu

import (
	"net/http"
	"slices"
	"sort"

	"github.com/oracle/oci-go-sdk/v65/common"
	"github.com/oracle/oci-go-sdk/v65/loadbalancer"
)

// registerClassic serves the Load Balancing API (classic load balancers).
func (e *Emulator) registerClassic(mux *http.ServeMux) {
	const lb = "/20170115/loadBalancers/{loadBalancerId}"
	const set = lb + "/backendSets/{backendSetName}"
	e.route(mux, "GET "+lb, "GetLoadBalancer", false, e.classicGetLoadBalancer)
	e.route(mux, "GET "+lb+"/backendSets", "ListBackendSets", false, e.classicListBackendSets)
	e.route(mux, "GET "+set, "GetBackendSet", false, e.classicGetBackendSet)
	e.route(mux, "PUT "+set, "UpdateBackendSet", true, e.classicUpdateBackendSet)
	e.route(mux, "GET "+set+"/health", "GetBackendSetHealth", false, e.classicGetBackendSetHealth)
	e.route(mux, "GET "+set+"/backends", "ListBackends", false, e.classicListBackends)
	e.route(mux, "POST "+set+"/backends", "CreateBackend", true, e.classicCreateBackend)
	e.route(mux, "GET "+set+"/backends/{backendName}", "GetBackend", false, e.classicGetBackend)
	e.route(mux, "GET "+set+"/backends/{backendName}/health", "GetBackendHealth", false, e.classicGetBackendHealth)
	e.route(mux, "PUT "+set+"/backends/{backendName}", "UpdateBackend", true, e.classicUpdateBackend)
	e.route(mux, "DELETE "+set+"/backends/{backendName}", "DeleteBackend", true, e.classicDeleteBackend)
	e.route(mux, "GET /20170115/loadBalancerWorkRequests/{workRequestId}", "GetWorkRequest", false, e.classicGetWorkRequest)
	e.route(mux, "GET "+lb+"/workRequests", "ListWorkRequests", false, e.classicListWorkRequests)
}

func (e *Emulator) classicGetLoadBalancer(rc *requestContext) (*response, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	b, err := classicFamily.balancer(e, rc.loadBalancerID)
	if err != nil {
		return nil, err
	}
	return answer(*b.classic, b.etag())
}

func (e *Emulator) classicListBackendSets(rc *requestContext) (*response, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	b, err := classicFamily.balancer(e, rc.loadBalancerID)
	if err != nil {
		return nil, err
	}
	sets := []loadbalancer.BackendSet{}
	for _, name := range sortedKeys(b.classic.BackendSets) {
		sets = append(sets, copyJSON(b.classic.BackendSets[name]))
	}
	return &response{status: http.StatusOK, body: sets, etag: b.etag()}, nil
}

func (e *Emulator) classicGetBackendSet(rc *requestContext) (*response, error) {
	name := rc.r.PathValue("backendSetName")
	e.mu.Lock()
	defer e.mu.Unlock()
	b, set, err := classicFamily.backendSet(e, rc.loadBalancerID, name)
	if err != nil {
		return nil, err
	}
	return answer(set, classicFamily.etag(b, name))
}

var classicPolicies = []string{"ROUND_ROBIN", "LEAST_CONNECTIONS", "IP_HASH"}

// classicUpdateBackendSet replaces a backend set: a PUT, so whatever the
// request leaves out (SSL, session persistence, health checker fields, a
// backend's max connections) is left unset. The service requires policy,
// backends and healthChecker.
func (e *Emulator) classicUpdateBackendSet(rc *requestContext) (*response, error) {
	var d loadbalancer.UpdateBackendSetDetails
	if err := rc.decode(&d); err != nil {
		return nil, err
	}
	name := rc.r.PathValue("backendSetName")
	e.mu.Lock()
	defer e.mu.Unlock()
	b, _, err := classicFamily.backendSet(e, rc.loadBalancerID, name)
	if err != nil {
		return nil, err
	}
	updated, err := classicBackendSetFrom(name, d)
	if err == nil {
		err = classicFamily.admits(b, name, updated, e.opts.BackendsPerBackendSet)
	}
	if err != nil {
		return nil, err
	}
	return classicFamily.submitChange(e, rc, b, "UpdateBackendSet", name, func(s *loadbalancer.BackendSet) { *s = updated })
}

func classicBackendSetFrom(name string, d loadbalancer.UpdateBackendSetDetails) (loadbalancer.BackendSet, *apiError) {
	switch {
	case d.Policy == nil:
		return loadbalancer.BackendSet{}, invalidParameter("policy is required")
	case d.Backends == nil:
		return loadbalancer.BackendSet{}, invalidParameter("backends is required")
	case d.HealthChecker == nil:
		return loadbalancer.BackendSet{}, invalidParameter("healthChecker is required")
	case !slices.Contains(classicPolicies, *d.Policy):
		return loadbalancer.BackendSet{}, invalidParameter("policy " + *d.Policy + " is not one of ROUND_ROBIN, LEAST_CONNECTIONS, IP_HASH")
	case d.SessionPersistenceConfiguration != nil && d.LbCookieSessionPersistenceConfiguration != nil:
		return loadbalancer.BackendSet{}, invalidParameter("sessionPersistenceConfiguration and lbCookieSessionPersistenceConfiguration are mutually exclusive")
	}
	if p := d.HealthChecker.Protocol; p == nil || (*p != "HTTP" && *p != "TCP") {
		return loadbalancer.BackendSet{}, invalidParameter("healthChecker.protocol must be HTTP or TCP")
	}
	set := convertJSON[loadbalancer.BackendSet](d)
	set.Name = common.String(name)
	seen := map[string]bool{}
	for i := range set.Backends {
		be := &set.Backends[i]
		if err := normalizeClassicBackend(be); err != nil {
			return loadbalancer.BackendSet{}, invalidParameter("backends[" + itoa(i) + "]: " + err.message)
		}
		if seen[*be.Name] {
			return loadbalancer.BackendSet{}, invalidParameter("backends[" + itoa(i) + "]: duplicate backend " + *be.Name)
		}
		seen[*be.Name] = true
	}
	return set, nil
}

func (e *Emulator) classicListBackends(rc *requestContext) (*response, error) {
	name := rc.r.PathValue("backendSetName")
	e.mu.Lock()
	defer e.mu.Unlock()
	b, set, err := classicFamily.backendSet(e, rc.loadBalancerID, name)
	if err != nil {
		return nil, err
	}
	return answer(set.Backends, classicFamily.etag(b, name))
}

func (e *Emulator) classicGetBackend(rc *requestContext) (*response, error) {
	name, backend := rc.r.PathValue("backendSetName"), rc.r.PathValue("backendName")
	e.mu.Lock()
	defer e.mu.Unlock()
	b, set, err := classicFamily.backendSet(e, rc.loadBalancerID, name)
	if err != nil {
		return nil, err
	}
	i := classicFamily.backendIndex(set, backend)
	if i < 0 {
		return nil, notFound("backend " + backend)
	}
	return answer(set.Backends[i], classicFamily.etag(b, name))
}

func (e *Emulator) classicCreateBackend(rc *requestContext) (*response, error) {
	var d loadbalancer.CreateBackendDetails
	if err := rc.decode(&d); err != nil {
		return nil, err
	}
	name := rc.r.PathValue("backendSetName")
	e.mu.Lock()
	defer e.mu.Unlock()
	b, set, err := classicFamily.backendSet(e, rc.loadBalancerID, name)
	if err != nil {
		return nil, err
	}
	be := convertJSON[loadbalancer.Backend](d)
	if err := normalizeClassicBackend(&be); err != nil {
		return nil, err
	}
	if classicFamily.backendIndex(set, *be.Name) >= 0 {
		return nil, alreadyExists("backend " + *be.Name + " already exists in backend set " + name)
	}
	return classicFamily.addBackend(e, rc, b, name, be)
}

func (e *Emulator) classicUpdateBackend(rc *requestContext) (*response, error) {
	var d loadbalancer.UpdateBackendDetails
	if err := rc.decode(&d); err != nil {
		return nil, err
	}
	if d.Weight == nil || d.Backup == nil || d.Drain == nil || d.Offline == nil {
		return nil, invalidParameter("weight, backup, drain and offline are required")
	}
	if err := backendRules(d.Weight, d.MaxConnections); err != nil {
		return nil, err
	}
	if *d.Backup {
		set, err := classicFamily.requestedSet(e, rc)
		if err == nil && deref(set.Policy) == "IP_HASH" {
			err = invalidParameter("a backend set with the IP_HASH policy takes no backup backend")
		}
		if err != nil {
			return nil, err
		}
	}
	return classicFamily.changeBackend(e, rc, "UpdateBackend", func(be *loadbalancer.Backend) bool {
		be.Weight, be.Backup, be.Drain, be.Offline, be.MaxConnections = d.Weight, d.Backup, d.Drain, d.Offline, d.MaxConnections
		return true
	})
}

func (e *Emulator) classicDeleteBackend(rc *requestContext) (*response, error) {
	return classicFamily.changeBackend(e, rc, "DeleteBackend", func(*loadbalancer.Backend) bool { return false })
}

func (e *Emulator) classicGetWorkRequest(rc *requestContext) (*response, error) {
	id := rc.r.PathValue("workRequestId")
	e.mu.Lock()
	defer e.mu.Unlock()
	w := e.workRequests[id]
	if w == nil || w.balancer.classic == nil {
		return nil, notFound("work request " + id)
	}
	return &response{status: http.StatusOK, body: w.classicView()}, nil
}

func (e *Emulator) classicListWorkRequests(rc *requestContext) (*response, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	b, err := classicFamily.balancer(e, rc.loadBalancerID)
	if err != nil {
		return nil, err
	}
	items := []loadbalancer.WorkRequest{}
	for _, w := range e.listed(b) {
		items = append(items, w.classicView())
	}
	page, next, err := paginate(rc, items)
	if err != nil {
		return nil, err
	}
	return &response{status: http.StatusOK, body: page, nextPage: next}, nil
}

// listed is a load balancer's work requests (every one for nil) in the
// order ListWorkRequests answers: oldest first. OCI promises no order (the
// SDK's ListWorkRequestsRequest has no sort parameter, and Oracle's cloud
// controller manager reads every page), and oldest first is the order in
// which a client that reads only the first page misses the newest.
func (e *Emulator) listed(b *balancer) []*workRequest {
	var out []*workRequest
	for _, w := range e.workOrder {
		if b == nil || w.balancer == b {
			out = append(out, w)
		}
	}
	return out
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
