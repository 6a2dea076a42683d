package reconciler_test

import (
	"errors"
	"fmt"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/oracle/oci-go-sdk/v65/common"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/peppy-ratio/lbregistrar/api/v1beta1"
	"github.com/peppy-ratio/lbregistrar/reconciler"
	"github.com/peppy-ratio/lbregistrar/test/eventually"
	"github.com/peppy-ratio/lbregistrar/test/kube"
	"github.com/peppy-ratio/lbregistrar/test/ociemu"
)

// workloadIdentity serves the emulator's OKE workload identity exchange,
// which believes the service account tokens the test API server vouches
// for (a TokenReview, as OKE's proxy asks its cluster), and returns o
// pointed at it. The SDK reads the region and a cluster CA file from the
// environment, which it sets for the test.
func (f *fixture) workloadIdentity(t *testing.T, o reconciler.Options) reconciler.Options {
	t.Helper()
	host, err := f.emu.ServeWorkloadIdentity(kube.TokenReviewer(f.api))
	f.must(err)
	caFile := filepath.Join(t.TempDir(), "ca.crt")
	f.must(os.WriteFile(caFile, f.emu.CACertPEM(), 0o600))
	t.Setenv("OCI_KUBERNETES_SERVICE_ACCOUNT_CERT_PATH", caFile)
	t.Setenv("OCI_RESOURCE_PRINCIPAL_REGION", "us-ashburn-1")
	o.WorkloadIdentityHost, o.WorkloadIdentityCAFile = host, caFile
	return o
}

// signedAs counts who signed the calls to backend set set of lb that OCI
// accepted, writes only or all.
func (f *fixture) signedAs(lb, set string, writesOnly bool) map[string]int {
	by := map[string]int{}
	for _, c := range f.emu.Calls() {
		if c.LoadBalancerID == lb && strings.HasSuffix(c.Path, "/backendSets/"+set) && c.Status < 300 && (!writesOnly || c.Operation == "UpdateBackendSet") {
			by[c.Principal]++
		}
	}
	return by
}

// A resource naming a ServiceAccount signs in to OCI as it: the controller
// requests its token, OKE workload identity exchanges it for a session,
// and the session signs the writes. Switching a registered resource from
// its API key to the ServiceAccount writes nothing.
func TestWorkloadIdentityOfAServiceAccount(t *testing.T) {
	f := newFixture(t, ociemu.Options{})
	f.startManager(f.workloadIdentity(t, f.options()))
	f.must(f.api.Create(f.ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "lb-writer"}}))
	asServiceAccount := func(o *v1beta1.LBRegistrar) {
		o.Spec.APIKey = nil
		o.Spec.WorkloadIdentity = &v1beta1.WorkloadIdentity{Region: "us-ashburn-1", ServiceAccount: &v1beta1.ServiceAccountReference{Namespace: f.ns, Name: "lb-writer"}}
	}
	serviceAccount := fmt.Sprintf("system:serviceaccount:%s:lb-writer", f.ns)

	f.node(f.ns+"-a", "10.0.9.1")
	f.registrar("wi", classicLB, []v1beta1.Target{fixedPort("api", 30090)}, asServiceAccount)
	f.expectBackends(classicLB, "api", "10.0.9.1:30090/1")
	if by := f.signedAs(classicLB, "api", true); len(by) != 1 || by[serviceAccount] == 0 {
		t.Errorf("writes signed by %v, want only %s", by, serviceAccount)
	}

	keyed := f.registrar("switch", classicLB, []v1beta1.Target{fixedPort("admin", 30091)})
	f.expectBackends(classicLB, "admin", "10.0.9.1:30091/1")
	before := f.signedAs(classicLB, "admin", true)
	f.updateRegistrar(keyed, asServiceAccount)
	f.eventually(time.Minute, func() error {
		if f.signedAs(classicLB, "admin", false)[serviceAccount] == 0 {
			return errors.New("the switched resource has not read its backend set as the service account yet")
		}
		return nil
	})
	if after := f.signedAs(classicLB, "admin", true); !maps.Equal(after, before) {
		t.Errorf("writes after the switch: %v, before: %v; want none", after, before)
	}
	f.node(f.ns+"-b", "10.0.9.2")
	f.expectBackends(classicLB, "admin", "10.0.9.1:30091/1", "10.0.9.2:30091/1")
	if by := f.signedAs(classicLB, "admin", true); by[serviceAccount] != 1 {
		t.Errorf("writes signed by %v, want the new node's by %s", by, serviceAccount)
	}
}

// A session OCI stops accepting (its ServiceAccount deleted, the session
// revoked) is noticed on the next call: the controller signs in again, the
// ServiceAccount has no token to give, and the resource says so with
// Ready=False; nothing registered is removed.
func TestWorkloadIdentityRevoked(t *testing.T) {
	f := newFixture(t, ociemu.Options{})
	o := f.options()
	o.CleanupTimeout = time.Second // its deletion cannot sign in either
	f.startManager(f.workloadIdentity(t, o))
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "lb-writer"}}
	f.must(f.api.Create(f.ctx, sa))
	f.node(f.ns+"-a", "10.0.9.1")
	obj := f.registrar("revoked", classicLB, []v1beta1.Target{fixedPort("api", 30092)}, func(o *v1beta1.LBRegistrar) {
		o.Spec.APIKey = nil
		o.Spec.WorkloadIdentity = &v1beta1.WorkloadIdentity{Region: "us-ashburn-1", ServiceAccount: &v1beta1.ServiceAccountReference{Namespace: f.ns, Name: "lb-writer"}}
	})
	f.expectBackends(classicLB, "api", "10.0.9.1:30092/1")

	f.must(f.api.Delete(f.ctx, sa))
	f.emu.ExpireSessions(fmt.Sprintf("system:serviceaccount:%s:lb-writer", f.ns))
	f.node(f.ns+"-b", "10.0.9.2")
	f.waitReady(obj, v1beta1.ReasonServiceAccountNotFound, func(_ *v1beta1.LBRegistrar, ready *metav1.Condition) error {
		if want := fmt.Sprintf("spec.workloadIdentity.serviceAccount: ServiceAccount %s/lb-writer not found: create it, or name another", f.ns); ready.Message != want {
			return fmt.Errorf("Ready says %q, want %q", ready.Message, want)
		}
		return nil
	})
	f.expectBackends(classicLB, "api", "10.0.9.1:30092/1")

	// Nothing watched changes when the ServiceAccount is back: the sign-in
	// is retried soon, not at the resync.
	f.must(f.api.Create(f.ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "lb-writer"}}))
	eventually.Passes(t, 30*time.Second, 100*time.Millisecond, func() error {
		if got := f.backends(classicLB, "api"); len(got) != 2 {
			return fmt.Errorf("backends %q, want the new node's too", got)
		}
		return nil
	})
}

// Sessions the SDK renews every second or so (it renews at half their
// life less five minutes) while a write's work request takes seconds: the
// renewals go through mid-wait, nothing is refused, and the write lands.
func TestWorkloadIdentityRenewedDuringAWorkRequest(t *testing.T) {
	f := newFixture(t, ociemu.Options{SessionTokenLifetime: 5*time.Minute + 3*time.Second, WorkRequestLatency: 4 * time.Second})
	f.startManager(f.workloadIdentity(t, f.options()))
	f.must(f.api.Create(f.ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "lb-writer"}}))
	f.node(f.ns+"-a", "10.0.9.1")
	f.registrar("renewed", classicLB, []v1beta1.Target{fixedPort("api", 30093)}, func(o *v1beta1.LBRegistrar) {
		o.Spec.APIKey = nil
		o.Spec.WorkloadIdentity = &v1beta1.WorkloadIdentity{Region: "us-ashburn-1", ServiceAccount: &v1beta1.ServiceAccountReference{Namespace: f.ns, Name: "lb-writer"}}
	})
	f.expectBackends(classicLB, "api", "10.0.9.1:30093/1")
	if got := f.emu.Counters().SessionTokens; got < 2 {
		t.Errorf("%d sessions issued during a 4 s work request, want a renewal", got)
	}
	for _, c := range f.emu.Calls() {
		if c.Status == 401 {
			t.Errorf("refused: %s %s: %s", c.Operation, c.Path, c.AuthError)
		}
	}
}

// A workload identity that names no ServiceAccount, or names the
// controller's own, and an instance principal, are the controller's own
// identities: refused unless serve allows them, and then the controller's
// ServiceAccount, or the instance it runs on (the emulator's metadata and
// auth services, answered in process), signs in.
func TestControllerIdentity(t *testing.T) {
	const instance = "ocid1.instance.oc1.iad.controller"
	identities := map[string]struct {
		set       func(*fixture, *v1beta1.LBRegistrar)
		principal func(f *fixture) string
	}{
		"workload identity": {
			set: func(_ *fixture, o *v1beta1.LBRegistrar) {
				o.Spec.WorkloadIdentity = &v1beta1.WorkloadIdentity{Region: "us-ashburn-1"}
			},
			principal: func(f *fixture) string { return fmt.Sprintf("system:serviceaccount:%s:lbregistrar", f.ns) },
		},
		"the controller's ServiceAccount named": {
			set: func(f *fixture, o *v1beta1.LBRegistrar) {
				o.Spec.WorkloadIdentity = &v1beta1.WorkloadIdentity{Region: "us-ashburn-1",
					ServiceAccount: &v1beta1.ServiceAccountReference{Namespace: f.ns, Name: "lbregistrar"}}
			},
			principal: func(f *fixture) string { return fmt.Sprintf("system:serviceaccount:%s:lbregistrar", f.ns) },
		},
		"instance principal": {
			set: func(_ *fixture, o *v1beta1.LBRegistrar) {
				o.Spec.InstancePrincipal = &v1beta1.InstancePrincipal{Region: "us-ashburn-1"}
			},
			principal: func(*fixture) string { return instance },
		},
	}
	for name, identity := range identities {
		for _, allowed := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/allowed=%v", name, allowed), func(t *testing.T) {
				f := newFixture(t, ociemu.Options{})
				o := f.workloadIdentity(t, f.options())
				o.AllowControllerIdentity = allowed
				o.ControllerUser = fmt.Sprintf("system:serviceaccount:%s:lbregistrar", f.ns)
				var err error
				o.InstanceDispatcher, err = f.emu.InstancePrincipal(instance)
				f.must(err)
				f.startManager(o)
				f.must(f.api.Create(f.ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "lbregistrar"}}))
				f.node(f.ns+"-a", "10.0.9.1")
				obj := f.registrar("controller", classicLB, []v1beta1.Target{fixedPort("api", 30094)}, func(o *v1beta1.LBRegistrar) {
					o.Spec.APIKey = nil
					identity.set(f, o)
				})
				if !allowed {
					f.waitReady(obj, v1beta1.ReasonControllerIdentityNotAllowed)
					if by := f.signedAs(classicLB, "api", false); len(by) != 0 {
						t.Errorf("OCI called by %v", by)
					}
					return
				}
				f.expectBackends(classicLB, "api", "10.0.9.1:30094/1")
				if by, want := f.signedAs(classicLB, "api", true), identity.principal(f); by[want] != 1 || len(by) != 1 {
					t.Errorf("writes signed by %v, want one by %s", by, want)
				}
			})
		}
	}
}

// A sign-in that takes long (the SDK asking a slow metadata service) makes
// the resource SigningIn rather than occupying a worker until it ends; once
// it has, the resource is written as the instance.
func TestSlowSignInIsSigningIn(t *testing.T) {
	const instance = "ocid1.instance.oc1.iad.slow"
	f := newFixture(t, ociemu.Options{})
	o := f.workloadIdentity(t, f.options())
	o.AllowControllerIdentity = true
	o.OCI.SignInWait = 100 * time.Millisecond
	fast, err := f.emu.InstancePrincipal(instance)
	f.must(err)
	var once sync.Once
	o.InstanceDispatcher = func(d common.HTTPRequestDispatcher) (common.HTTPRequestDispatcher, error) {
		inner, err := fast(d)
		return delayed{inner, func() { once.Do(func() { time.Sleep(2 * time.Second) }) }}, err
	}
	f.startManager(o)
	f.node(f.ns+"-a", "10.0.9.2")
	obj := f.registrar("slow-sign-in", classicLB, []v1beta1.Target{fixedPort("api", 30095)}, func(o *v1beta1.LBRegistrar) {
		o.Spec.APIKey = nil
		o.Spec.InstancePrincipal = &v1beta1.InstancePrincipal{Region: "us-ashburn-1"}
	})
	f.waitReady(obj, v1beta1.ReasonSigningIn)
	f.expectBackends(classicLB, "api", "10.0.9.2:30095/1")
	if by := f.signedAs(classicLB, "api", true); by[instance] != 1 || len(by) != 1 {
		t.Errorf("writes signed by %v, want one by the instance", by)
	}
}

// delayed is a dispatcher that calls wait before each request.
type delayed struct {
	next common.HTTPRequestDispatcher
	wait func()
}

func (d delayed) Do(req *http.Request) (*http.Response, error) {
	d.wait()
	return d.next.Do(req)
}
