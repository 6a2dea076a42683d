package ociemu_test

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/oracle/oci-go-sdk/v65/common"
	"github.com/oracle/oci-go-sdk/v65/loadbalancer"
	"github.com/oracle/oci-go-sdk/v65/networkloadbalancer"

	"github.com/peppy-ratio/lbregistrar/test/eventually"
	"github.com/peppy-ratio/lbregistrar/test/ociemu"
)

const (
	healthClassicID = "ocid1.loadbalancer.oc1.iad.health"
	healthNetworkID = "ocid1.networkloadbalancer.oc1.iad.health"
)

// freePort is a loopback port nothing listens on.
func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	must(t, err)
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	return port
}

// httpBackend answers every request with code and returns its port.
func httpBackend(t *testing.T, code int) int {
	t.Helper()
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/healthz" {
			w.WriteHeader(http.StatusNotFound)
			return
		}
		w.WriteHeader(code)
	}))
	t.Cleanup(s.Close)
	return s.Listener.Addr().(*net.TCPAddr).Port
}

func classicBackend(ip string, port int) loadbalancer.Backend {
	return loadbalancer.Backend{IpAddress: common.String(ip), Port: common.Int(port), Weight: common.Int(1)}
}

// seedHealth adds a classic load balancer whose backend set "web" checks
// HTTP GET /healthz every 50 ms, and an NLB whose "tcp" set checks TCP.
func seedHealth(t *testing.T, f *fixture, classic []loadbalancer.Backend, network []networkloadbalancer.Backend) {
	t.Helper()
	fast := func(retries int) (*int, *int, *int) { return common.Int(retries), common.Int(1000), common.Int(50) }
	r, to, iv := fast(1)
	must(t, f.emu.SeedState(ociemu.Seed{
		LoadBalancers: []loadbalancer.LoadBalancer{{Id: common.String(healthClassicID), BackendSets: map[string]loadbalancer.BackendSet{
			"web": {Policy: common.String("ROUND_ROBIN"), Backends: classic, HealthChecker: &loadbalancer.HealthChecker{
				Protocol: common.String("HTTP"), UrlPath: common.String("/healthz"), ReturnCode: common.Int(200),
				Retries: r, TimeoutInMillis: to, IntervalInMillis: iv,
			}},
		}}},
		NetworkLoadBalancers: []networkloadbalancer.NetworkLoadBalancer{{Id: common.String(healthNetworkID), BackendSets: map[string]networkloadbalancer.BackendSet{
			"tcp": {Policy: networkloadbalancer.NetworkLoadBalancingPolicyThreeTuple, IsPreserveSource: common.Bool(false), Backends: network,
				HealthChecker: &networkloadbalancer.HealthChecker{Protocol: networkloadbalancer.HealthCheckProtocolsTcp, Retries: r, TimeoutInMillis: to, IntervalInMillis: iv}},
		}}},
	}))
}

func classicHealth(t *testing.T, f *fixture) loadbalancer.BackendSetHealth {
	t.Helper()
	resp, err := f.lb.GetBackendSetHealth(f.context, loadbalancer.GetBackendSetHealthRequest{
		LoadBalancerId: common.String(healthClassicID), BackendSetName: common.String("web")})
	must(t, err)
	return resp.BackendSetHealth
}

func networkHealth(t *testing.T, f *fixture) networkloadbalancer.BackendSetHealth {
	t.Helper()
	resp, err := f.nlb.GetBackendSetHealth(f.context, networkloadbalancer.GetBackendSetHealthRequest{
		NetworkLoadBalancerId: common.String(healthNetworkID), BackendSetName: common.String("tcp")})
	must(t, err)
	return resp.BackendSetHealth
}

// An HTTP check passes on returnCode only; a closed port and a wrong code
// are CRITICAL, a backend outside loopback UNKNOWN; fewer than half OK makes
// the set CRITICAL.
func TestClassicHealthChecksHTTP(t *testing.T) {
	f := newFixture(t, ociemu.Options{}, false)
	ok, wrong, closed := httpBackend(t, 200), httpBackend(t, 500), freePort(t)
	name := func(port int) string { return "127.0.0.1:" + strconv.Itoa(port) }
	seedHealth(t, f, []loadbalancer.Backend{
		classicBackend("127.0.0.1", ok), classicBackend("127.0.0.1", wrong), classicBackend("127.0.0.1", closed), classicBackend("10.0.0.99", 80),
	}, nil)

	want := loadbalancer.BackendSetHealth{
		Status: loadbalancer.BackendSetHealthStatusCritical, WarningStateBackendNames: []string{},
		CriticalStateBackendNames: []string{name(wrong), name(closed)}, UnknownStateBackendNames: []string{"10.0.0.99:80"},
		TotalBackendCount: common.Int(4),
	}
	eventually.Passes(t, 10*time.Second, 20*time.Millisecond, func() error {
		if got := classicHealth(t, f); fmt.Sprint(got) != fmt.Sprint(want) {
			return fmt.Errorf("got %v, want %v", got, want)
		}
		return nil
	})

	for port, result := range map[int]loadbalancer.HealthCheckResultHealthCheckStatusEnum{
		ok: loadbalancer.HealthCheckResultHealthCheckStatusOk, wrong: loadbalancer.HealthCheckResultHealthCheckStatusInvalidStatusCode,
		closed: loadbalancer.HealthCheckResultHealthCheckStatusConnectFailed,
	} {
		resp, err := f.lb.GetBackendHealth(f.context, loadbalancer.GetBackendHealthRequest{
			LoadBalancerId: common.String(healthClassicID), BackendSetName: common.String("web"), BackendName: common.String(name(port))})
		must(t, err)
		if len(resp.HealthCheckResults) != 1 || resp.HealthCheckResults[0].HealthCheckStatus != result {
			t.Errorf("backend %s: results %v, want one %s", name(port), resp.HealthCheckResults, result)
		}
	}
	resp, err := f.lb.GetBackendHealth(f.context, loadbalancer.GetBackendHealthRequest{
		LoadBalancerId: common.String(healthClassicID), BackendSetName: common.String("web"), BackendName: common.String("10.0.0.99:80")})
	must(t, err)
	if resp.Status != loadbalancer.BackendHealthStatusUnknown || len(resp.HealthCheckResults) != 0 {
		t.Errorf("backend outside loopback: %v, want UNKNOWN and never checked", resp.BackendHealth)
	}
}

// A TCP check follows its backend: OK while something listens, CRITICAL
// once it stops; a backend given by instance alone stays UNKNOWN. Half OK
// is WARNING.
func TestNetworkHealthFollowsListener(t *testing.T) {
	f := newFixture(t, ociemu.Options{}, false)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	must(t, err)
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	port := l.Addr().(*net.TCPAddr).Port
	name := "127.0.0.1:" + strconv.Itoa(port)
	seedHealth(t, f, nil, []networkloadbalancer.Backend{
		{IpAddress: common.String("127.0.0.1"), Port: common.Int(port), Weight: common.Int(1)},
		{TargetId: common.String("ocid1.instance.oc1.iad.elsewhere"), Port: common.Int(port), Weight: common.Int(1)},
	})
	expect := func(status networkloadbalancer.BackendSetHealthStatusEnum, critical []string) {
		t.Helper()
		eventually.Passes(t, 10*time.Second, 20*time.Millisecond, func() error {
			got := networkHealth(t, f)
			if got.Status != status || !slices.Equal(got.CriticalStateBackendNames, critical) ||
				!slices.Equal(got.UnknownStateBackendNames, []string{"ocid1.instance.oc1.iad.elsewhere:" + strconv.Itoa(port)}) {
				return fmt.Errorf("got %v, want %s with critical %v", got, status, critical)
			}
			return nil
		})
	}
	expect(networkloadbalancer.BackendSetHealthStatusWarning, []string{})
	l.Close()
	expect(networkloadbalancer.BackendSetHealthStatusCritical, []string{name})
}

// Neither health checks nor forwarders connect anywhere but loopback, while
// backends at private addresses are registered beside loopback ones.
func TestNoDialLeavesLoopback(t *testing.T) {
	dial, dialed := recordDials()
	f := newFixture(t, ociemu.Options{Dial: dial}, false)
	blue := greeter(t, "blue")
	seedHealth(t, f,
		[]loadbalancer.Backend{classicBackend("10.0.0.99", blue), classicBackend("192.168.9.9", blue)},
		[]networkloadbalancer.Backend{
			{IpAddress: common.String("10.0.0.99"), Port: common.Int(blue), Weight: common.Int(1)},
			{IpAddress: common.String("192.168.9.9"), Port: common.Int(blue), Weight: common.Int(1)},
			{IpAddress: common.String("127.0.0.1"), Port: common.Int(blue), Weight: common.Int(1)},
		})

	// Only private addresses: the forwarder closes the connection unanswered.
	web, err := f.emu.Forward(healthClassicID, "web")
	must(t, err)
	if got := dialRead(t, web); got != "" {
		t.Errorf("forwarder to private addresses only answered %q", got)
	}
	// Round robin over the NLB set passes the private ones over.
	tcp, err := f.emu.Forward(healthNetworkID, "tcp")
	must(t, err)
	for range 4 {
		if got := dialRead(t, tcp); got != "blue" {
			t.Errorf("forwarder answered %q, want blue", got)
		}
	}
	// Checks ran for a while: the loopback backend is OK.
	eventually.Passes(t, 10*time.Second, 20*time.Millisecond, func() error {
		resp, err := f.nlb.GetBackendHealth(f.context, networkloadbalancer.GetBackendHealthRequest{NetworkLoadBalancerId: common.String(healthNetworkID),
			BackendSetName: common.String("tcp"), BackendName: common.String("127.0.0.1:" + strconv.Itoa(blue))})
		must(t, err)
		if resp.Status != networkloadbalancer.BackendHealthStatusOk {
			return fmt.Errorf("loopback backend %v", resp.BackendHealth)
		}
		return nil
	})
	// More than half UNKNOWN: the set is UNKNOWN.
	if h := networkHealth(t, f); h.Status != networkloadbalancer.BackendSetHealthStatusUnknown || len(h.UnknownStateBackendNames) != 2 {
		t.Errorf("network health %v, want the private ones UNKNOWN", h)
	}
	if h := classicHealth(t, f); h.Status != loadbalancer.BackendSetHealthStatusUnknown || len(h.UnknownStateBackendNames) != 2 {
		t.Errorf("classic health %v, want both UNKNOWN", h)
	}
	expectLoopbackDials(t, dialed())
}

// recordDials is an Options.Dial that records each address it connects to.
func recordDials() (dial func(ctx context.Context, network, address string) (net.Conn, error), dialed func() []string) {
	var mu sync.Mutex
	var addrs []string
	dial = func(ctx context.Context, network, address string) (net.Conn, error) {
		mu.Lock()
		addrs = append(addrs, address)
		mu.Unlock()
		return (&net.Dialer{}).DialContext(ctx, network, address)
	}
	return dial, func() []string {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(addrs)
	}
}

// expectLoopbackDials fails unless something was dialed, all of it on loopback.
func expectLoopbackDials(t *testing.T, dialed []string) {
	t.Helper()
	if len(dialed) == 0 {
		t.Fatal("nothing was dialed")
	}
	for _, addr := range dialed {
		if ap, err := netip.ParseAddrPort(addr); err != nil || !ap.Addr().IsLoopback() {
			t.Errorf("dialed %s, outside loopback", addr)
		}
	}
}

// A backend at a pod's address with a loopback stand-in is checked and
// forwarded to there; one whose stand-in is not loopback is not connected
// to at all.
func TestStandInsAnswerForPods(t *testing.T) {
	dial, dialed := recordDials()
	f := newFixture(t, ociemu.Options{Dial: dial, StandIns: map[string]string{"10.1.0.21": "127.0.0.1", "10.1.0.22": "10.0.0.99"}}, false)
	blue := greeter(t, "blue")
	seedHealth(t, f, nil, []networkloadbalancer.Backend{
		{IpAddress: common.String("10.1.0.21"), Port: common.Int(blue), Weight: common.Int(1)},
		{IpAddress: common.String("10.1.0.22"), Port: common.Int(blue), Weight: common.Int(1)},
	})
	tcp, err := f.emu.Forward(healthNetworkID, "tcp")
	must(t, err)
	for range 2 {
		if got := dialRead(t, tcp); got != "blue" {
			t.Errorf("forwarder answered %q, want blue from the stand-in", got)
		}
	}
	eventually.Passes(t, 10*time.Second, 20*time.Millisecond, func() error {
		h := networkHealth(t, f)
		if h.Status != networkloadbalancer.BackendSetHealthStatusWarning || !slices.Equal(h.UnknownStateBackendNames, []string{"10.1.0.22:" + strconv.Itoa(blue)}) {
			return fmt.Errorf("network health %v, want 10.1.0.21 OK at its stand-in, 10.1.0.22 UNKNOWN", h)
		}
		return nil
	})
	expectLoopbackDials(t, dialed())
}
