package oci_test

import (
	"context"
	"crypto/rand"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/oracle/oci-go-sdk/v65/common"
	"github.com/oracle/oci-go-sdk/v65/networkloadbalancer"

	"github.com/peppy-ratio/lbregistrar/reconciler/oci"
	"github.com/peppy-ratio/lbregistrar/reconciler/plan"
	"github.com/peppy-ratio/lbregistrar/test/ociemu"
)

const lbID = "ocid1.loadbalancer.oc1.iad.ingress"

func TestFactoryChecksKeysWithoutRevealingThem(t *testing.T) {
	k, plain := oci.NewKey(t)
	//nolint:staticcheck // legacy encrypted PEM is what `openssl genrsa -aes256` writes and the SDK reads
	block, err := x509.EncryptPEMBlock(rand.Reader, "RSA PRIVATE KEY", x509.MarshalPKCS1PrivateKey(k), []byte("s3cret"), x509.PEMCipherAES256)
	if err != nil {
		t.Fatal(err)
	}
	encrypted := pem.EncodeToMemory(block)
	base := oci.Credentials{Tenancy: "ocid1.tenancy.oc1..t", User: "ocid1.user.oc1..u", Fingerprint: "aa:bb", Region: "us-ashburn-1"}
	with := func(key, pass []byte) oci.Credentials {
		c := base
		c.PrivateKey, c.Passphrase = key, pass
		return c
	}
	tests := []struct {
		name    string
		creds   oci.Credentials
		wantErr string
	}{
		{"plain key", with(plain, nil), ""},
		{"encrypted key with its passphrase", with(encrypted, []byte("s3cret")), ""},
		{"encrypted key without passphrase", with(encrypted, nil), "no passphrase"},
		{"wrong passphrase", with(encrypted, []byte("nope")), "passphrase is wrong"},
		{"not a key", with([]byte("-----BEGIN RSA PRIVATE KEY-----\nAAAA\n-----END RSA PRIVATE KEY-----\n"), nil), "not a PEM RSA key"},
		{"no region", func() oci.Credentials { c := with(plain, nil); c.Region = ""; return c }(), "apiKey.region is empty"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := oci.NewFactory(oci.Options{}).Client(tc.creds)
			if tc.wantErr == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if !errors.Is(err, oci.ErrInvalidCredentials) || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("err = %v, want one containing %q", err, tc.wantErr)
			}
			if strings.Contains(err.Error(), "s3cret") || strings.Contains(err.Error(), "BEGIN") {
				t.Fatalf("error reveals key material: %v", err)
			}
		})
	}

	c := with(plain, []byte("s3cret"))
	if s := fmt.Sprintf("%v %+v %#v %s", c, c, c, c); strings.Contains(s, "BEGIN") || strings.Contains(s, "s3cret") {
		t.Fatalf("formatted credentials reveal key material: %s", s)
	}
}

func TestFactoryCachesOneClientPerCredential(t *testing.T) {
	_, keyPEM := oci.NewKey(t)
	f := oci.NewFactory(oci.Options{})
	c := oci.Credentials{Tenancy: "t", User: "u", Fingerprint: "f", Region: "us-ashburn-1", PrivateKey: keyPEM}
	a, err := f.Client(c)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := f.Client(c)
	c.Fingerprint = "g"
	other, _ := f.Client(c)
	if a != b || a == other {
		t.Fatalf("cache: same credentials %v, other credentials %v", a == b, a == other)
	}
}

// A slow sign-in (the SDK asking an unreachable metadata service) keeps none
// of its callers waiting past SignInWait and runs once however many ask; its
// failure reaches the next caller, and the one after signs in afresh.
func TestSessionSignInHoldsNoCaller(t *testing.T) {
	_, keyPEM := oci.NewKey(t)
	f := oci.NewFactory(oci.Options{SignInWait: 20 * time.Millisecond})
	refused := errors.New("refused")
	var builds atomic.Int32
	release := make(chan error)
	newProvider := func() (common.ConfigurationProvider, error) {
		builds.Add(1)
		if err := <-release; err != nil {
			return nil, err
		}
		return common.NewRawConfigurationProvider("t", "u", "us-ashburn-1", "f", string(keyPEM), nil), nil
	}
	call := func() (*oci.Client, error) { return f.SessionClient("instance-principal", "us-ashburn-1", newProvider) }
	settled := func() (*oci.Client, error) {
		t.Helper()
		for range 500 {
			if cl, err := call(); !errors.Is(err, oci.ErrSigningIn) {
				return cl, err
			}
		}
		t.Fatal("the sign-in never ended")
		return nil, nil
	}

	for range 3 {
		if _, err := call(); !errors.Is(err, oci.ErrSigningIn) {
			t.Fatalf("while the sign-in runs: %v, want ErrSigningIn", err)
		}
	}
	release <- refused
	if _, err := settled(); !errors.Is(err, refused) {
		t.Fatalf("after the sign-in failed: %v, want its error", err)
	}
	if n := builds.Load(); n != 1 {
		t.Errorf("%d sign-ins for four callers, want 1", n)
	}
	if _, err := call(); !errors.Is(err, oci.ErrSigningIn) {
		t.Fatalf("once the failure was reported: %v, want a new sign-in under way", err)
	}
	release <- nil
	a, err := settled()
	if err != nil {
		t.Fatal(err)
	}
	if b, err := call(); err != nil || a != b || builds.Load() != 2 {
		t.Errorf("after it succeeded: same client %v, %v, %d sign-ins; want the cached client and 2", a == b, err, builds.Load())
	}
}

// emulatorClient returns a client of a key registered with a fresh emulator.
// reseed seeds emu again with the test seed as change leaves it.
func reseed(t *testing.T, emu *ociemu.Emulator, change func(*ociemu.Seed)) {
	t.Helper()
	seed, err := ociemu.LoadSeedFile("../testdata/seed.yaml")
	if err != nil {
		t.Fatal(err)
	}
	change(&seed)
	if err := emu.SeedState(seed); err != nil {
		t.Fatal(err)
	}
}

func emulatorClient(t *testing.T, register bool) (*ociemu.Emulator, *oci.Client) {
	t.Helper()
	return emulatorClientOver(t, register, nil)
}

// emulatorClientOver is emulatorClient sending through client (nil: the
// default).
func emulatorClientOver(t *testing.T, register bool, client *http.Client) (*ociemu.Emulator, *oci.Client) {
	t.Helper()
	emu := ociemu.StartSeeded(t, "../testdata/seed.yaml", ociemu.Options{WorkRequestLatency: 20 * time.Millisecond})
	var err error
	k, keyPEM := oci.NewKey(t)
	pub, _ := x509.MarshalPKIXPublicKey(&k.PublicKey)
	user := ociemu.User{Tenancy: "ocid1.tenancy.oc1..t", User: "ocid1.user.oc1..u"}
	if register {
		if user, err = emu.RegisterPublicKey(user.Tenancy, user.User, pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pub})); err != nil {
			t.Fatal(err)
		}
	} else {
		user.Fingerprint, _ = ociemu.Fingerprint(&k.PublicKey)
	}
	f := oci.NewFactory(oci.Options{
		LoadBalancerEndpoint: emu.URL(), NetworkLoadBalancerEndpoint: emu.URL(), CoreEndpoint: emu.URL(), HTTPClient: client,
		RateLimit: 1000, Burst: 1000, PollMin: time.Millisecond, PollMax: 50 * time.Millisecond,
	})
	c, err := f.Client(oci.Credentials{Tenancy: user.Tenancy, User: user.User, Fingerprint: user.Fingerprint, Region: "us-ashburn-1", PrivateKey: keyPEM})
	if err != nil {
		t.Fatal(err)
	}
	return emu, c
}

func TestErrorsAreClassifiedForRetry(t *testing.T) {
	ctx := context.Background()
	emu, c := emulatorClient(t, true)
	tests := []struct {
		name       string
		fault      ociemu.Fault
		wantReason string
		wantAfter  time.Duration
	}{
		{"409 Conflict", ociemu.Fault{Status: 409, Code: "Conflict"}, "conflict", 0},
		{"409 IncorrectState", ociemu.Fault{Status: 409, Code: "IncorrectState"}, "conflict", 0},
		{"412", ociemu.Fault{Status: 412, Code: "NoEtagMatch"}, "precondition", 0},
		{"429 with Retry-After", ociemu.Fault{Status: 429, RetryAfter: 2 * time.Second}, "throttled", 2 * time.Second},
		{"500", ociemu.Fault{Status: 500}, "server", 0},
		{"503", ociemu.Fault{Status: 503}, "server", 0},
		{"400 is final", ociemu.Fault{Status: 400, Code: "InvalidParameter"}, "", 0},
		{"501 is final", ociemu.Fault{Status: 501, Code: "MethodNotImplemented"}, "", 0},
		{"401 is final within a reconcile", ociemu.Fault{Status: 401, Code: "NotAuthenticated"}, "", 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tc.fault.Operation, tc.fault.Times = "GetBackendSet", 1
			emu.AddFault(tc.fault)
			_, err := c.GetBackendSet(ctx, lbID, "web")
			reason, after, retry := oci.Retryable(err)
			if err == nil || reason != tc.wantReason || retry != (tc.wantReason != "") || after != tc.wantAfter {
				t.Fatalf("Retryable(%v) = %q, %s, %v", err, reason, after, retry)
			}
		})
	}
	if _, err := c.GetBackendSet(ctx, lbID, "no-such-set"); !oci.IsNotFound(err) {
		t.Fatalf("missing backend set: %v", err)
	}
	if _, err := c.GetBackendSet(ctx, "ocid1.loadbalancer.oc1.iad.nothere", "web"); !oci.IsNotFound(err) {
		t.Fatalf("missing load balancer: %v", err)
	}

	_, unregistered := emulatorClient(t, false)
	if _, err := unregistered.GetBackendSet(ctx, lbID, "web"); err == nil {
		t.Fatal("an unregistered key was accepted")
	} else if _, _, retry := oci.Retryable(err); retry {
		t.Fatalf("authentication failure classified as retryable: %v", err)
	}
}

const nlbID = "ocid1.networkloadbalancer.oc1.iad.tcp"

// waitForAWrite writes a backend set ("api" of the classic load balancer,
// "tcp" of the NLB) with fault installed and returns how waiting for the
// write's work request ended.
func waitForAWrite(t *testing.T, loadBalancerID string, fault ociemu.Fault) error {
	t.Helper()
	ctx := context.Background()
	emu, c := emulatorClient(t, true)
	emu.AddFault(fault)
	bs, err := c.GetBackendSet(ctx, loadBalancerID, setOf(loadBalancerID))
	if err != nil {
		t.Fatal(err)
	}
	id, err := c.UpdateBackendSet(ctx, bs, nil, "")
	if err != nil {
		t.Fatal(err)
	}
	return c.WaitWorkRequest(ctx, loadBalancerID, id)
}

// setOf is the seeded backend set the tests write in a load balancer.
func setOf(loadBalancerID string) string {
	if oci.IsNetworkLoadBalancer(loadBalancerID) {
		return "tcp"
	}
	return "api"
}

func TestFailedWorkRequestIsRetryable(t *testing.T) {
	err := waitForAWrite(t, lbID, ociemu.Fault{Operation: "UpdateBackendSet", FailWorkRequest: true, Times: 1})
	if reason, _, retry := oci.Retryable(err); !retry || reason != "workrequest" || !oci.IsWorkRequestFailed(err) {
		t.Fatalf("failed work request: %v (%q)", err, reason)
	}
}

// A failed work request is reported with the reasons OCI gives (a classic
// one's errorDetails, an NLB one's ListWorkRequestErrors); bad input or a
// limit is final, anything else is retried.
func TestWhyAWorkRequestFailedIsReported(t *testing.T) {
	for _, tc := range []struct {
		lb, code string
		rejected bool
	}{
		{lbID, "", false},
		{lbID, "BAD_INPUT", true},
		{nlbID, "", false},
		{nlbID, "InvalidParameter", true},
		{nlbID, "LimitExceeded", true},
		{nlbID, "ServiceUnavailable", false},
	} {
		t.Run(tc.lb+" "+tc.code, func(t *testing.T) {
			err := waitForAWrite(t, tc.lb, ociemu.Fault{Operation: "UpdateBackendSet", FailWorkRequest: true, Times: 1,
				FailCode: tc.code, FailMessage: "the reason OCI gives"})
			_, _, retry := oci.Retryable(err)
			if !oci.IsWorkRequestFailed(err) || oci.IsRefused(err) != tc.rejected || retry == tc.rejected ||
				!strings.Contains(err.Error(), "the reason OCI gives") || !strings.Contains(err.Error(), tc.code) {
				t.Fatalf("%v: rejected %v, retryable %v; want rejected %v, with OCI's reason", err, oci.IsRefused(err), retry, tc.rejected)
			}
		})
	}
}

// A 404 while polling a work request says the work request is not known,
// not that the backend set is missing, nor that the work request failed.
func TestWorkRequestNotFoundIsNeitherMissingSetNorFailure(t *testing.T) {
	err := waitForAWrite(t, lbID, ociemu.Fault{Operation: "GetWorkRequest", Status: 404, Code: "NotAuthorizedOrNotFound"})
	if err == nil || oci.IsNotFound(err) || oci.IsWorkRequestFailed(err) {
		t.Fatalf("WaitWorkRequest = %v: want an error that is neither a missing backend set nor a failed work request", err)
	}
}

func TestWriteWithStaleETagIsRefused(t *testing.T) {
	ctx := context.Background()
	_, c := emulatorClient(t, true)
	first, err := c.GetBackendSet(ctx, lbID, "web")
	if err != nil {
		t.Fatal(err)
	}
	second, _ := c.GetBackendSet(ctx, lbID, "web")
	id, err := c.UpdateBackendSet(ctx, first, first.Backends[:0], "")
	if err != nil {
		t.Fatal(err)
	}
	if err := c.WaitWorkRequest(ctx, lbID, id); err != nil {
		t.Fatal(err)
	}
	_, err = c.UpdateBackendSet(ctx, second, second.Backends, "")
	if reason, _, retry := oci.Retryable(err); !retry || reason != "precondition" {
		t.Fatalf("write with a stale ETag: %v (%q)", err, reason)
	}
}

// backendSets is every backend set of a load balancer, as JSON.
func backendSets(t *testing.T, emu *ociemu.Emulator, id string) string {
	t.Helper()
	st := emu.State()
	var sets any
	for _, lb := range st.LoadBalancers {
		if *lb.Id == id {
			sets = lb.BackendSets
		}
	}
	for _, lb := range st.NetworkLoadBalancers {
		if *lb.Id == id {
			sets = lb.BackendSets
		}
	}
	raw, err := json.MarshalIndent(sets, "", " ")
	if err != nil || sets == nil {
		t.Fatalf("no load balancer %s (%v)", id, err)
	}
	return string(raw)
}

func TestCancellationAbortsACallInFlight(t *testing.T) {
	emu, c := emulatorClient(t, true)
	emu.AddFault(ociemu.Fault{Operation: "GetWorkRequest", Delay: 3 * time.Second})
	bs, err := c.GetBackendSet(context.Background(), lbID, "api")
	if err != nil {
		t.Fatal(err)
	}
	id, err := c.UpdateBackendSet(context.Background(), bs, nil, "")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	err = c.WaitWorkRequest(ctx, lbID, id)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want the context's deadline", err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("the call was not aborted: returned after %s", d)
	}
}

// A write whose answer is lost (a 5xx, a cut connection) while OCI runs its
// work request is sent again, as the writer retries it, with the same retry
// token, and gets that work request back instead of making a second write.
func TestLostAnswerIsMatchedToItsWorkRequest(t *testing.T) {
	ctx := context.Background()
	for _, lost := range []ociemu.Fault{{Status: 500}, {}} {
		t.Run(fmt.Sprintf("status %d", lost.Status), func(t *testing.T) {
			emu, c := emulatorClient(t, true)
			stuck := emu.AddFault(ociemu.Fault{Operation: "UpdateBackendSet", StuckUpdating: true, Times: 1})
			lost.Operation, lost.LoseResponse, lost.Times = "UpdateBackendSet", true, 1
			emu.AddFault(lost)
			write := func() (string, error) {
				bs, err := c.GetBackendSet(ctx, lbID, "api")
				if err != nil {
					t.Fatal(err)
				}
				return c.UpdateBackendSet(ctx, bs, []plan.Backend{{IP: "10.9.9.9", Port: 31000, Weight: 1}}, "")
			}
			if _, err := write(); err == nil {
				t.Fatal("the lost answer reached the client")
			} else if _, _, retry := oci.Retryable(err); !retry {
				t.Fatalf("lost answer not retryable: %v", err)
			}
			id, err := write()
			if err != nil {
				t.Fatal(err)
			}
			emu.RemoveFault(stuck)
			if err := c.WaitWorkRequest(ctx, lbID, id); err != nil {
				t.Fatal(err)
			}
			var tokens []string
			for _, call := range emu.Calls() {
				if call.Operation == "UpdateBackendSet" {
					tokens = append(tokens, call.RetryToken)
				}
			}
			if c := emu.Counters(); c.WorkRequests != 1 || len(tokens) != 2 || tokens[0] == "" || tokens[0] != tokens[1] {
				t.Fatalf("%d work requests, retry tokens %q: want one work request, both writes under one token", c.WorkRequests, tokens)
			}
		})
	}
}

// Every failed call keeps its opc-request-id, which Oracle support asks for:
// OCI's answer's, or the one the SDK sent when no answer came.
func TestFailedCallsKeepTheirRequestID(t *testing.T) {
	ctx := context.Background()
	for _, fault := range []ociemu.Fault{{Status: 500}, {Status: 400, Code: "InvalidParameter"}, {LoseResponse: true}} {
		t.Run(fmt.Sprintf("status %d", fault.Status), func(t *testing.T) {
			emu, c := emulatorClient(t, true)
			bs, err := c.GetBackendSet(ctx, lbID, "api")
			if err != nil {
				t.Fatal(err)
			}
			fault.Operation, fault.Times = "UpdateBackendSet", 1
			emu.AddFault(fault)
			_, err = c.UpdateBackendSet(ctx, bs, nil, "")
			calls := emu.Calls()
			want := calls[len(calls)-1].RequestID // the SDK's id, then OCI's part after a slash
			if fault.LoseResponse {
				want, _, _ = strings.Cut(want, "/")
			}
			if err == nil || oci.RequestID(err) != want || !strings.Contains(err.Error(), want) {
				t.Fatalf("error %v (request id %q): want opc-request-id %q in it", err, oci.RequestID(err), want)
			}
		})
	}
}

// Both APIs' health reads come back in one shape; the seeded backends are
// outside loopback, which the emulator never checks, so OCI reports them
// UNKNOWN by ip:port or instance:port.
func TestGetBackendSetHealth(t *testing.T) {
	_, c := emulatorClient(t, true)
	for _, tc := range []struct {
		lb, set string
		want    oci.BackendSetHealth
	}{
		{"ocid1.loadbalancer.oc1.iad.ingress", "health", oci.BackendSetHealth{Status: "UNKNOWN",
			Warning: []string{}, Critical: []string{}, Unknown: []string{"192.168.9.9:30999"}}},
		{"ocid1.networkloadbalancer.oc1.iad.tcp", "tcp", oci.BackendSetHealth{Status: "UNKNOWN",
			Warning: []string{}, Critical: []string{}, Unknown: []string{"192.168.9.9:30080", "ocid1.instance.oc1.iad.someoneelse:30080"}}},
	} {
		got, err := c.GetBackendSetHealth(context.Background(), tc.lb, tc.set)
		if err != nil {
			t.Fatal(err)
		}
		if d := cmp.Diff(&tc.want, got); d != "" {
			t.Errorf("%s %s (-want +got):\n%s", tc.lb, tc.set, d)
		}
	}
	if _, err := c.GetBackendSetHealth(context.Background(), "ocid1.loadbalancer.oc1.iad.ingress", "missing"); !oci.IsNotFound(err) {
		t.Errorf("missing backend set: %v, want not found", err)
	}
}

// WorkRequests lists a load balancer's work requests, saying which have
// ended, on both APIs (an NLB's through its compartment), and only that
// load balancer's.
func TestWorkRequests(t *testing.T) {
	ctx := context.Background()
	for _, lb := range []string{lbID, nlbID} {
		t.Run(lb, func(t *testing.T) {
			emu, c := emulatorClient(t, true)
			if wrs, err := c.WorkRequests(ctx, lb); err != nil || len(wrs) != 0 {
				t.Fatalf("before any write: %v, %v", wrs, err)
			}
			stuck := emu.AddFault(ociemu.Fault{Operation: "UpdateBackendSet", LoadBalancerID: lb, StuckUpdating: true})
			bs, err := c.GetBackendSet(ctx, lb, setOf(lb))
			if err != nil {
				t.Fatal(err)
			}
			id, err := c.UpdateBackendSet(ctx, bs, append(bs.Backends, plan.Backend{IP: "10.0.0.9", Port: 30090, Weight: 1}), "")
			if err != nil {
				t.Fatal(err)
			}
			if wrs, err := c.WorkRequests(ctx, lb); err != nil || !slices.Equal(wrs, []oci.WorkRequest{{ID: id}}) {
				t.Errorf("while it runs: %v, %v; want %s in flight", wrs, err, id)
			}
			emu.RemoveFault(stuck)
			if err := c.WaitWorkRequest(ctx, lb, id); err != nil {
				t.Fatal(err)
			}
			if wrs, err := c.WorkRequests(ctx, lb); err != nil || !slices.Equal(wrs, []oci.WorkRequest{{ID: id, Ended: true}}) {
				t.Errorf("after it ended: %v, %v; want %s ended", wrs, err, id)
			}
		})
	}
}

// OCI promises no order for a listing of work requests (the emulator
// answers oldest first): one in flight behind more than a page of ended
// ones is still found, since every page is read.
func TestWorkRequestsReadsEveryPage(t *testing.T) {
	ctx := context.Background()
	const ended = 120
	for _, lb := range []string{lbID, nlbID} {
		t.Run(lb, func(t *testing.T) {
			emu, c := emulatorClient(t, true)
			write := func(port int32) string {
				t.Helper()
				bs, err := c.GetBackendSet(ctx, lb, setOf(lb))
				if err != nil {
					t.Fatal(err)
				}
				id, err := c.UpdateBackendSet(ctx, bs, []plan.Backend{{IP: "10.0.0.9", Port: port, Weight: 1}}, "")
				if err != nil {
					t.Fatal(err)
				}
				return id
			}
			for i := range ended {
				id := write(30000 + int32(i))
				emu.FinishWorkRequests()
				if err := c.WaitWorkRequest(ctx, lb, id); err != nil {
					t.Fatal(err)
				}
			}
			emu.AddFault(ociemu.Fault{Operation: "UpdateBackendSet", LoadBalancerID: lb, StuckUpdating: true})
			id := write(31000)
			wrs, err := c.WorkRequests(ctx, lb)
			if err != nil {
				t.Fatal(err)
			}
			if len(wrs) != ended+1 || !slices.Equal(oci.InFlight(wrs), []string{id}) {
				t.Errorf("listed %d work requests, %v in flight; want %d, %s in flight", len(wrs), oci.InFlight(wrs), ended+1, id)
			}
		})
	}
}

// An NLB backend set is read even when its listeners cannot be: the last
// read of them stands in, however old, and with none it says why its
// protocols are not known rather than failing the read (which would stop
// removals and drains too).
func TestBackendSetReadOutlivesItsListeners(t *testing.T) {
	ctx := context.Background()
	emu, c := emulatorClient(t, true)
	reseed(t, emu, func(seed *ociemu.Seed) {
		seed.NetworkLoadBalancers[0].Listeners = map[string]networkloadbalancer.Listener{"dns": {Name: common.String("dns"),
			DefaultBackendSetName: common.String("tcp"), Port: common.Int(53), Protocol: networkloadbalancer.ListenerProtocolsUdp}}
	})
	fault := emu.AddFault(ociemu.Fault{Operation: "GetNetworkLoadBalancer", Status: 500})
	bs, err := c.GetBackendSet(ctx, nlbID, "tcp")
	if err != nil || bs.ProtocolsUnread == nil || len(bs.Protocols) > 0 || len(bs.Backends) == 0 {
		t.Fatalf("listeners unread, none read before: %+v, %v; want the backend set, saying its protocols are unread", bs, err)
	}
	emu.RemoveFault(fault)
	if bs, err = c.GetBackendSet(ctx, nlbID, "tcp"); err != nil || bs.ProtocolsUnread != nil || !slices.Equal(bs.Protocols, []string{"UDP"}) {
		t.Fatalf("listeners read: %+v, %v; want UDP", bs, err)
	}
	oci.AgeNLBReads(c)
	emu.AddFault(ociemu.Fault{Operation: "GetNetworkLoadBalancer", Status: 500})
	if bs, err = c.GetBackendSet(ctx, nlbID, "tcp"); err != nil || bs.ProtocolsUnread != nil || !slices.Equal(bs.Protocols, []string{"UDP"}) {
		t.Fatalf("listeners unread, an old read stands in: %+v, %v; want UDP as read before", bs, err)
	}
}

// One read of an NLB a minute serves its backend set reads (the listeners)
// and its work request listings (the compartment).
func TestOneNLBReadServesSetsAndListings(t *testing.T) {
	ctx := context.Background()
	emu, c := emulatorClient(t, true)
	for range 2 {
		if _, err := c.GetBackendSet(ctx, nlbID, "tcp"); err != nil {
			t.Fatal(err)
		}
		if _, err := c.WorkRequests(ctx, nlbID); err != nil {
			t.Fatal(err)
		}
	}
	reads := 0
	for _, call := range emu.Calls() {
		if call.Operation == "GetNetworkLoadBalancer" {
			reads++
		}
	}
	if reads != 1 {
		t.Errorf("%d reads of the NLB for two backend set reads and two listings, want 1", reads)
	}
}

// One listing of a compartment's NLB work requests serves every NLB of it
// asking for a listing started no earlier than it: a watch round lists the
// compartment once, not once per NLB. Each NLB still sees only its own
// work requests, and a later bound lists again.
func TestOneCompartmentListingServesItsNLBs(t *testing.T) {
	ctx := context.Background()
	emu, c := emulatorClient(t, true)
	other := nlbID + "-other"
	reseed(t, emu, func(seed *ociemu.Seed) {
		nlb := seed.NetworkLoadBalancers[0]
		nlb.Id = common.String(other)
		seed.NetworkLoadBalancers = append(seed.NetworkLoadBalancers, nlb)
	})
	bs, err := c.GetBackendSet(ctx, nlbID, "tcp")
	if err != nil {
		t.Fatal(err)
	}
	id, err := c.UpdateBackendSet(ctx, bs, append(bs.Backends, plan.Backend{IP: "10.0.0.9", Port: 30090, Weight: 1}), "")
	if err != nil {
		t.Fatal(err)
	}
	listings := func() int {
		n := 0
		for _, call := range emu.Calls() {
			if call.Operation == "ListWorkRequests" {
				n++
			}
		}
		return n
	}
	round := time.Now()
	mine, err := c.WorkRequestsSince(ctx, nlbID, round)
	if err != nil || len(mine) != 1 || mine[0].ID != id {
		t.Fatalf("the written NLB's work requests: %v, %v; want %s", mine, err, id)
	}
	theirs, err := c.WorkRequestsSince(ctx, other, round)
	if err != nil || len(theirs) != 0 {
		t.Fatalf("the other NLB's: %v, %v; want none", theirs, err)
	}
	if n := listings(); n != 1 {
		t.Errorf("%d listings for two NLBs of one compartment in one round, want 1", n)
	}
	if _, err := c.WorkRequestsSince(ctx, other, time.Now()); err != nil {
		t.Fatal(err)
	}
	if n := listings(); n != 2 {
		t.Errorf("%d listings after asking for a newer one, want 2", n)
	}
}
