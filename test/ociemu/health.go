package ociemu

import (
	"bufio"
	"cmp"
	"context"
	"errors"
	"io"
	"maps"
	"net"
	"net/http"
	"net/netip"
	"regexp"
	"slices"
	"strconv"
	"time"

	"github.com/oracle/oci-go-sdk/v65/common"
	"github.com/oracle/oci-go-sdk/v65/loadbalancer"
	"github.com/oracle/oci-go-sdk/v65/networkloadbalancer"
)

// Health statuses, as both APIs spell them for a backend and a backend set.
const (
	healthOK       = "OK"
	healthWarning  = "WARNING"
	healthCritical = "CRITICAL"
	healthUnknown  = "UNKNOWN"
)

// MinHealthCheckInterval is the shortest interval between two health checks
// of one backend, whatever its health checker asks for; tests seed short
// intervals to see health change quickly.
const MinHealthCheckInterval = 50 * time.Millisecond

// healthTick is how often the prober looks for backends due for a check.
const healthTick = MinHealthCheckInterval / 2

// errNotLoopback refuses a connection the emulator may not make.
var errNotLoopback = errors.New("the emulator connects to loopback addresses only")

// isLoopback reports whether ip is a loopback address (127.0.0.0/8, ::1,
// or 127.0.0.0/8 mapped into IPv6). Anything else, host names included, is not.
func isLoopback(ip string) bool {
	addr, err := netip.ParseAddr(ip)
	return err == nil && addr.Unmap().IsLoopback()
}

// connectAddress is the address the emulator connects to for a backend at
// ip: its stand-in (Options.StandIns) or its own, or "" when that is not
// loopback. The emulator runs on developer machines and in CI next to real
// networks, so a backend registered at any other address is never
// connected to: it may name a real host.
func connectAddress(ip string, standIns map[string]string) string {
	if s, ok := standIns[ip]; ok {
		ip = s
	}
	if !isLoopback(ip) {
		return ""
	}
	return ip
}

// dialBackend connects to a backend at ip (a connectAddress) for a health
// check or a forwarder.
func (e *Emulator) dialBackend(ctx context.Context, ip string, port int) (net.Conn, error) {
	if !isLoopback(ip) {
		return nil, errNotLoopback
	}
	return e.opts.Dial(ctx, "tcp", net.JoinHostPort(ip, strconv.Itoa(port)))
}

// healthKey names one backend of one backend set.
type healthKey struct{ loadBalancerID, backendSet, backend string }

// checker is a backend set's health checker, either API's, with defaults.
type checker struct {
	protocol   string // TCP and HTTP are probed; any other is UNKNOWN
	port       int    // 0: the backend's port
	urlPath    string
	returnCode int
	bodyRegex  string
	retries    int
	timeout    time.Duration
	interval   time.Duration
}

// newChecker applies the defaults both SDKs document on HealthChecker:
// retries 3, timeoutInMillis 3000, intervalInMillis 10000; the interval is
// never shorter than MinHealthCheckInterval.
func newChecker(protocol string, port, retries, timeout, interval *int, urlPath *string, returnCode *int, bodyRegex *string) checker {
	c := checker{protocol: protocol, port: deref(port), urlPath: deref(urlPath), returnCode: deref(returnCode), bodyRegex: deref(bodyRegex),
		retries: 3, timeout: 3 * time.Second, interval: 10 * time.Second}
	if retries != nil && *retries > 0 {
		c.retries = *retries
	}
	if timeout != nil && *timeout > 0 {
		c.timeout = time.Duration(*timeout) * time.Millisecond
	}
	if interval != nil {
		c.interval = max(time.Duration(*interval)*time.Millisecond, MinHealthCheckInterval)
	}
	if c.urlPath == "" {
		c.urlPath = "/"
	}
	if c.returnCode == 0 {
		c.returnCode = http.StatusOK
	}
	return c
}

// probeTarget is one backend to check, at ip:port unless its checker names
// another port.
type probeTarget struct {
	key     healthKey
	ip      string // the connectAddress of the backend's, "" for none
	port    int
	checker checker
}

// backendHealth is what the prober knows of one backend.
type backendHealth struct {
	// status is UNKNOWN until retries checks in a row agreed, then OK or
	// CRITICAL; it changes only after retries checks in a row disagree
	// ("the number of retries to attempt before a backend server is
	// considered unhealthy ... also applies when recovering", SDK
	// HealthChecker.Retries).
	status        string
	passes, fails int
	result        string    // the last check's HealthCheckResult status
	checked       time.Time // when the last check ended
	next          time.Time
	probing       bool
}

// setProbeTargets lists the backends of one backend set of b that the
// prober checks, each with the set's checker; callers have e.mu locked.
func setProbeTargets(b *balancer, name string, standIns map[string]string) []probeTarget {
	var out []probeTarget
	add := func(c checker, backendName, ip *string, port *int) {
		t := probeTarget{key: healthKey{b.id(), name, deref(backendName)}, ip: connectAddress(deref(ip), standIns), port: deref(port), checker: c}
		if t.probes() {
			out = append(out, t)
		}
	}
	if b.classic != nil {
		hc := cmp.Or(b.classic.BackendSets[name].HealthChecker, &loadbalancer.HealthChecker{})
		c := newChecker(deref(hc.Protocol), hc.Port, hc.Retries, hc.TimeoutInMillis, hc.IntervalInMillis, hc.UrlPath, hc.ReturnCode, hc.ResponseBodyRegex)
		for _, be := range b.classic.BackendSets[name].Backends {
			add(c, be.Name, be.IpAddress, be.Port)
		}
		return out
	}
	hc := cmp.Or(b.network.BackendSets[name].HealthChecker, &networkloadbalancer.HealthChecker{})
	c := newChecker(string(hc.Protocol), hc.Port, hc.Retries, hc.TimeoutInMillis, hc.IntervalInMillis, hc.UrlPath, hc.ReturnCode, hc.ResponseBodyRegex)
	for _, be := range b.network.BackendSets[name].Backends {
		add(c, be.Name, be.IpAddress, be.Port)
	}
	return out
}

// setNames are the names of b's backend sets.
func (b *balancer) setNames() []string {
	if b.classic != nil {
		return slices.Collect(maps.Keys(b.classic.BackendSets))
	}
	return slices.Collect(maps.Keys(b.network.BackendSets))
}

// probeList keeps, per backend set, the backends the prober checks, and
// lists a backend set's again only once it changed (every applied change
// moves its generation on) or its load balancer was seeded again. Listing
// every backend of every backend set each tick would take most of a second
// under e.mu at 300 backend sets of 5,000 backends.
type probeList struct {
	sets  map[probeSet]*listedSet
	tick  uint64
	lists int // backend sets listed, for tests
}

// probeSet is one backend set of one load balancer as seeded.
type probeSet struct {
	b    *balancer
	name string
}

type listedSet struct {
	generation uint64
	checked    []probeTarget
	tick       uint64 // the last tick the backend set existed
}

// targets returns the backends to check; callers have e.mu locked.
func (p *probeList) targets(e *Emulator) []probeTarget {
	if p.sets == nil {
		p.sets = map[probeSet]*listedSet{}
	}
	p.tick++
	var out []probeTarget
	for _, b := range e.balancers {
		for _, name := range b.setNames() {
			k := probeSet{b, name}
			l := p.sets[k]
			if l == nil || l.generation != b.setGeneration[name] {
				l = &listedSet{generation: b.setGeneration[name], checked: setProbeTargets(b, name, e.opts.StandIns)}
				p.sets[k] = l
				p.lists++
			}
			l.tick = p.tick
			out = append(out, l.checked...)
		}
	}
	maps.DeleteFunc(p.sets, func(_ probeSet, l *listedSet) bool { return l.tick != p.tick })
	return out
}

// probes reports whether t is ever checked: a backend given by instance
// alone, at an address other than loopback (and without a loopback
// stand-in), or under a health check protocol the emulator does not model
// (HTTPS, UDP, DNS) stays UNKNOWN.
func (t probeTarget) probes() bool {
	return t.ip != "" && (t.checker.protocol == "TCP" || t.checker.protocol == "HTTP")
}

// runHealthChecks checks every backend it may check on its backend set's
// interval until ctx ends, and forgets backends that are gone or no longer
// checked.
func (e *Emulator) runHealthChecks(ctx context.Context) {
	tick := time.NewTicker(healthTick)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-tick.C:
			e.startDueChecks(ctx, now)
		}
	}
}

func (e *Emulator) startDueChecks(ctx context.Context, now time.Time) {
	e.mu.Lock()
	defer e.mu.Unlock()
	seen := map[healthKey]bool{}
	for _, t := range e.probed.targets(e) { // others are UNKNOWN, as a backend without an entry is
		seen[t.key] = true
		h := e.health[t.key]
		if h == nil {
			h = &backendHealth{status: healthUnknown, result: healthUnknown}
			e.health[t.key] = h
		}
		if h.probing || now.Before(h.next) {
			continue
		}
		h.probing = true
		e.probes.Go(func() {
			result := e.check(ctx, t)
			e.mu.Lock()
			defer e.mu.Unlock()
			h.record(result, t.checker, time.Now())
		})
	}
	for k := range e.health {
		if !seen[k] {
			delete(e.health, k)
		}
	}
}

// record folds one check's result into h.
func (h *backendHealth) record(result string, c checker, at time.Time) {
	h.probing, h.result, h.checked, h.next = false, result, at, at.Add(c.interval)
	if result == healthOK {
		h.passes, h.fails = h.passes+1, 0
	} else {
		h.passes, h.fails = 0, h.fails+1
	}
	switch {
	case h.passes >= c.retries:
		h.status = healthOK
	case h.fails >= c.retries:
		h.status = healthCritical
	}
}

// check runs one health check and returns its HealthCheckResult status.
func (e *Emulator) check(ctx context.Context, t probeTarget) string {
	ctx, cancel := context.WithTimeout(ctx, t.checker.timeout)
	defer cancel()
	port := t.port
	if t.checker.port != 0 {
		port = t.checker.port // "If the port is not specified, the load balancer uses the port ... from the Backend object"
	}
	conn, err := e.dialBackend(ctx, t.ip, port)
	if err != nil {
		if ctx.Err() != nil {
			return "TIMED_OUT"
		}
		return "CONNECT_FAILED"
	}
	defer conn.Close()
	if t.checker.protocol == "TCP" {
		return healthOK
	}
	return httpCheck(ctx, conn, t, port)
}

// httpCheck sends GET urlPath and compares the status code with returnCode
// and the body with responseBodyRegex, when one is set.
func httpCheck(ctx context.Context, conn net.Conn, t probeTarget, port int) string {
	if deadline, ok := ctx.Deadline(); ok {
		_ = conn.SetDeadline(deadline) // a probe past it fails on its own
	}
	req, err := http.NewRequest(http.MethodGet, "http://"+net.JoinHostPort(t.ip, strconv.Itoa(port))+t.checker.urlPath, nil)
	if err != nil {
		return "IO_ERROR"
	}
	req.Close = true
	if err := req.Write(conn); err != nil {
		return ioResult(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), req)
	if err != nil {
		return ioResult(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != t.checker.returnCode {
		return "INVALID_STATUS_CODE"
	}
	if t.checker.bodyRegex == "" {
		return healthOK
	}
	re, err := regexp.Compile(t.checker.bodyRegex)
	if err != nil {
		return "REGEX_MISMATCH"
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return ioResult(err)
	}
	if !re.Match(body) {
		return "REGEX_MISMATCH"
	}
	return healthOK
}

func ioResult(err error) string {
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return "TIMED_OUT"
	}
	return "IO_ERROR"
}

// setHealth is the health of one backend set: its backends' statuses by
// the name each API reports them under, and the overall status. No backend
// is ever WARNING: a classic one is when its load balancer's primary and
// standby disagree (SDK BackendHealth.Status), and the emulator has one
// prober.
type setHealth struct {
	status            string
	critical, unknown []string
	total             int
}

// backendSetHealth summarizes the named backend set's backends, by their
// address (or instance) and port; callers have e.mu locked.
func (e *Emulator) backendSetHealth(id, set string, backends []healthEntry) setHealth {
	out := setHealth{total: len(backends), critical: []string{}, unknown: []string{}}
	ok := 0
	for _, be := range backends {
		status := healthUnknown
		if h := e.health[healthKey{id, set, be.name}]; h != nil {
			status = h.status
		}
		switch status {
		case healthOK:
			ok++
		case healthCritical:
			out.critical = append(out.critical, be.reported)
		default:
			out.unknown = append(out.unknown, be.reported)
		}
	}
	out.status = overallHealth(ok, len(out.unknown), out.total)
	return out
}

// overallHealth is a backend set's status by the rule both SDKs document on
// BackendSetHealth.Status: OK when every backend is OK; UNKNOWN when more
// than half are UNKNOWN (which covers "no probes have yet been sent", and a
// set without backends); CRITICAL when fewer than half are OK; WARNING
// otherwise.
func overallHealth(ok, unknown, total int) string {
	switch {
	case total == 0:
		return healthUnknown
	case ok == total:
		return healthOK
	case 2*unknown > total:
		return healthUnknown
	case 2*ok < total:
		return healthCritical
	default:
		return healthWarning
	}
}

// healthEntry is a backend as the health reads see it: its name in the
// emulator's state and the ip:port (or instance:port) the health lists
// identify it by.
type healthEntry struct{ name, reported string }

func classicHealthEntries(set loadbalancer.BackendSet) []healthEntry {
	out := make([]healthEntry, 0, len(set.Backends))
	for _, be := range set.Backends {
		out = append(out, healthEntry{deref(be.Name), classicBackendName(deref(be.IpAddress), deref(be.Port))})
	}
	return out
}

func networkHealthEntries(set networkloadbalancer.BackendSet) []healthEntry {
	out := make([]healthEntry, 0, len(set.Backends))
	for _, be := range set.Backends {
		out = append(out, healthEntry{deref(be.Name), networkBackendName(be.IpAddress, be.TargetId, deref(be.Port))})
	}
	return out
}

func (e *Emulator) classicGetBackendSetHealth(rc *requestContext) (*response, error) {
	name := rc.r.PathValue("backendSetName")
	e.mu.Lock()
	defer e.mu.Unlock()
	_, set, err := classicFamily.backendSet(e, rc.loadBalancerID, name)
	if err != nil {
		return nil, err
	}
	h := e.backendSetHealth(rc.loadBalancerID, name, classicHealthEntries(set))
	return &response{status: http.StatusOK, body: loadbalancer.BackendSetHealth{
		Status: loadbalancer.BackendSetHealthStatusEnum(h.status), WarningStateBackendNames: []string{},
		CriticalStateBackendNames: h.critical, UnknownStateBackendNames: h.unknown, TotalBackendCount: common.Int(h.total),
	}}, nil
}

func (e *Emulator) networkGetBackendSetHealth(rc *requestContext) (*response, error) {
	name := rc.r.PathValue("backendSetName")
	e.mu.Lock()
	defer e.mu.Unlock()
	_, set, err := networkFamily.backendSet(e, rc.loadBalancerID, name)
	if err != nil {
		return nil, err
	}
	h := e.backendSetHealth(rc.loadBalancerID, name, networkHealthEntries(set))
	return &response{status: http.StatusOK, body: networkloadbalancer.BackendSetHealth{
		Status: networkloadbalancer.BackendSetHealthStatusEnum(h.status), WarningStateBackendNames: []string{},
		CriticalStateBackendNames: h.critical, UnknownStateBackendNames: h.unknown, TotalBackendCount: common.Int(h.total),
	}}, nil
}

// backendHealthOf is one backend's status and last check; callers have
// e.mu locked.
func (e *Emulator) backendHealthOf(id, set, backend string) (status, result string, checked time.Time) {
	h := e.health[healthKey{id, set, backend}]
	if h == nil {
		return healthUnknown, healthUnknown, time.Time{}
	}
	return h.status, h.result, h.checked
}

func (e *Emulator) classicGetBackendHealth(rc *requestContext) (*response, error) {
	name, backend := rc.r.PathValue("backendSetName"), rc.r.PathValue("backendName")
	e.mu.Lock()
	defer e.mu.Unlock()
	_, set, err := classicFamily.backendSet(e, rc.loadBalancerID, name)
	if err != nil {
		return nil, err
	}
	if classicFamily.backendIndex(set, backend) < 0 {
		return nil, notFound("backend " + backend)
	}
	status, result, checked := e.backendHealthOf(rc.loadBalancerID, name, backend)
	body := loadbalancer.BackendHealth{Status: loadbalancer.BackendHealthStatusEnum(status), HealthCheckResults: []loadbalancer.HealthCheckResult{}}
	if !checked.IsZero() {
		body.HealthCheckResults = append(body.HealthCheckResults, loadbalancer.HealthCheckResult{
			SubnetId: common.String(emulatorSubnet), SourceIpAddress: common.String("127.0.0.1"),
			Timestamp: &common.SDKTime{Time: checked.UTC()}, HealthCheckStatus: loadbalancer.HealthCheckResultHealthCheckStatusEnum(result),
		})
	}
	return &response{status: http.StatusOK, body: body}, nil
}

func (e *Emulator) networkGetBackendHealth(rc *requestContext) (*response, error) {
	name, backend := rc.r.PathValue("backendSetName"), rc.r.PathValue("backendName")
	e.mu.Lock()
	defer e.mu.Unlock()
	_, set, err := networkFamily.backendSet(e, rc.loadBalancerID, name)
	if err != nil {
		return nil, err
	}
	if networkFamily.backendIndex(set, backend) < 0 {
		return nil, notFound("backend " + backend)
	}
	status, result, checked := e.backendHealthOf(rc.loadBalancerID, name, backend)
	body := networkloadbalancer.BackendHealth{Status: networkloadbalancer.BackendHealthStatusEnum(status), HealthCheckResults: []networkloadbalancer.HealthCheckResult{}}
	if !checked.IsZero() {
		body.HealthCheckResults = append(body.HealthCheckResults, networkloadbalancer.HealthCheckResult{
			Timestamp: &common.SDKTime{Time: checked.UTC()}, HealthCheckStatus: networkloadbalancer.HealthCheckResultHealthCheckStatusEnum(result),
		})
	}
	return &response{status: http.StatusOK, body: body}, nil
}

// emulatorSubnet is the subnet a classic health check result names as the
// one hosting the load balancer that reported it.
const emulatorSubnet = "ocid1.subnet.oc1..emulatorsubnet"
