package ociemu_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/oracle/oci-go-sdk/v65/common"
	"github.com/oracle/oci-go-sdk/v65/loadbalancer"
	"github.com/oracle/oci-go-sdk/v65/networkloadbalancer"

	"github.com/peppy-ratio/lbregistrar/test/eventually"
	"github.com/peppy-ratio/lbregistrar/test/ociemu"
)

const (
	classicID   = "ocid1.loadbalancer.oc1.iad.classicexample"
	networkID   = "ocid1.networkloadbalancer.oc1.iad.networkexample"
	compartment = "ocid1.compartment.oc1..example"
)

// fixture is an emulator seeded from testdata/seed.yaml and a real SDK
// client of each service, signing with a key registered with it.
type fixture struct {
	emu     *ociemu.Emulator
	lb      loadbalancer.LoadBalancerClient
	nlb     networkloadbalancer.NetworkLoadBalancerClient
	config  common.ConfigurationProvider
	useTLS  bool
	context context.Context
}

// transports runs a test over plain HTTP and over HTTPS.
func transports(t *testing.T, opts ociemu.Options, test func(t *testing.T, f *fixture)) {
	for _, useTLS := range []bool{false, true} {
		name := "http"
		if useTLS {
			name = "https"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			test(t, newFixture(t, opts, useTLS))
		})
	}
}

func newFixture(t testing.TB, opts ociemu.Options, useTLS bool) *fixture {
	t.Helper()
	emu := ociemu.StartSeeded(t, "testdata/seed.yaml", opts)
	config, err := emu.NewUser()
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{emu: emu, config: config, useTLS: useTLS, context: context.Background()}
	f.lb, f.nlb = f.clients(t, config)
	return f
}

// clients builds SDK clients the way a controller would, then points them
// at the emulator with retries and the circuit breaker off, so each call is
// exactly one request and injected faults are seen as they are.
func (f *fixture) clients(t testing.TB, config common.ConfigurationProvider) (loadbalancer.LoadBalancerClient, networkloadbalancer.NetworkLoadBalancerClient) {
	t.Helper()
	lb, err := loadbalancer.NewLoadBalancerClientWithConfigurationProvider(config)
	if err != nil {
		t.Fatal(err)
	}
	nlb, err := networkloadbalancer.NewNetworkLoadBalancerClientWithConfigurationProvider(config)
	if err != nil {
		t.Fatal(err)
	}
	noRetry := common.NoRetryPolicy()
	for _, c := range []*common.BaseClient{&lb.BaseClient, &nlb.BaseClient} {
		c.Host = f.emu.URL()
		if f.useTLS {
			c.Host = f.emu.HTTPSURL()
			c.HTTPClient = f.emu.HTTPClient()
		}
		c.Configuration.RetryPolicy = &noRetry
		c.Configuration.CircuitBreaker = nil
	}
	return lb, nlb
}

// serviceError asserts err is an SDK service error with this status and code.
func serviceError(t *testing.T, err error, status int, code string) common.ServiceError {
	t.Helper()
	if err == nil {
		t.Fatalf("want %d %s, got success", status, code)
	}
	var se common.ServiceError
	if !errors.As(err, &se) {
		t.Fatalf("want a common.ServiceError, got %T: %v", err, err)
	}
	if se.GetHTTPStatusCode() != status || se.GetCode() != code {
		t.Fatalf("want %d %s, got %d %s: %s", status, code, se.GetHTTPStatusCode(), se.GetCode(), se.GetMessage())
	}
	if se.GetOpcRequestID() == "" {
		t.Errorf("error carries no opc-request-id")
	}
	return se
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// waitClassic polls a classic work request until it leaves ACCEPTED and IN_PROGRESS.
func (f *fixture) waitClassic(t *testing.T, id string) loadbalancer.WorkRequest {
	t.Helper()
	return waitWorkRequest(t, id, func() (loadbalancer.WorkRequest, string, bool) {
		resp, err := f.lb.GetWorkRequest(f.context, loadbalancer.GetWorkRequestRequest{WorkRequestId: &id})
		must(t, err)
		state := resp.LifecycleState
		return resp.WorkRequest, string(state),
			state == loadbalancer.WorkRequestLifecycleStateSucceeded || state == loadbalancer.WorkRequestLifecycleStateFailed
	})
}

// waitNetwork polls an NLB work request until it leaves ACCEPTED and IN_PROGRESS.
func (f *fixture) waitNetwork(t *testing.T, id string) networkloadbalancer.WorkRequest {
	t.Helper()
	return waitWorkRequest(t, id, func() (networkloadbalancer.WorkRequest, string, bool) {
		resp, err := f.nlb.GetWorkRequest(f.context, networkloadbalancer.GetWorkRequestRequest{WorkRequestId: &id})
		must(t, err)
		state := resp.Status
		return resp.WorkRequest, string(state),
			state == networkloadbalancer.OperationStatusSucceeded || state == networkloadbalancer.OperationStatusFailed
	})
}

// waitWorkRequest calls get until it reports the work request finished,
// failing the test when it is still running after ten seconds.
func waitWorkRequest[W any](t *testing.T, id string, get func() (w W, state string, finished bool)) W {
	t.Helper()
	var last W
	eventually.Passes(t, 10*time.Second, 5*time.Millisecond, func() error {
		w, state, finished := get()
		if !finished {
			return fmt.Errorf("work request %s still %s", id, state)
		}
		last = w
		return nil
	})
	return last
}

// waitStuck waits until a work request was due to finish and a
// StuckUpdating fault kept it in flight.
func (f *fixture) waitStuck(t *testing.T, id string) {
	t.Helper()
	eventually.Passes(t, 10*time.Second, 5*time.Millisecond, func() error {
		for _, w := range f.emu.WorkRequests() {
			if w.ID != id {
				continue
			}
			if !w.Stuck {
				return fmt.Errorf("work request %s %s, not stuck yet", id, w.Status)
			}
			return nil
		}
		return fmt.Errorf("no work request %s", id)
	})
}

func classicDetails(set loadbalancer.BackendSet, backends ...loadbalancer.BackendDetails) loadbalancer.UpdateBackendSetDetails {
	hc := set.HealthChecker
	return loadbalancer.UpdateBackendSetDetails{
		Policy:   set.Policy,
		Backends: append([]loadbalancer.BackendDetails{}, backends...),
		HealthChecker: &loadbalancer.HealthCheckerDetails{
			Protocol: hc.Protocol, UrlPath: hc.UrlPath, Port: hc.Port, ReturnCode: hc.ReturnCode,
			Retries: hc.Retries, TimeoutInMillis: hc.TimeoutInMillis, IntervalInMillis: hc.IntervalInMillis,
			ResponseBodyRegex: hc.ResponseBodyRegex,
		},
	}
}
