package reconciler_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/peppy-ratio/lbregistrar/api/v1beta1"
	"github.com/peppy-ratio/lbregistrar/test/ociemu"
)

// One resource, three targets over two backend sets: "web" shared by two
// Services with the same weight, "api" narrowed by filterByEndpoints. The
// write of "web" fails while "api" is written: "api" stays as written (no
// rollback), Ready says which backend set failed, and once OCI takes the
// write again the resource converges without touching "api" a second time.
func TestSeveralServicesPartialFailureConverges(t *testing.T) {
	f := newFixture(t, ociemu.Options{WorkRequestLatency: 10 * time.Millisecond})
	a, b := f.ns+"-a", f.ns+"-b"
	f.node(a, "10.0.20.1")
	f.node(b, "10.0.20.2")
	http := corev1.ServicePort{Name: "http", Port: 80, TargetPort: intstr.FromInt32(8080)}
	web, api := f.service("web", http), f.service("api", http)
	webPort, apiPort := web.Spec.Ports[0].NodePort, api.Spec.Ports[0].NodePort
	f.endpoints("api", a)
	byName := intstr.FromString("http")
	target := func(service, set string, weight int32, filter bool) v1beta1.Target {
		return v1beta1.Target{Name: service, Namespace: f.ns, Port: &byName, BackendSetName: set, Weight: weight, FilterByEndpoints: filter}
	}
	// The emulator refuses every write of "web" until the fault goes; the
	// other backend set is written first (they are written in name order).
	fault := f.emu.AddFault(ociemu.Fault{Operation: "UpdateBackendSet", LoadBalancerID: classicLB, BackendSet: "web", Status: 400, Code: "InvalidParameter"})
	f.startManager(f.options())
	obj := f.registrar("multi", classicLB, []v1beta1.Target{
		target("web", "web", 2, false),
		target("api", "web", 2, false),
		target("api", "api", 1, true),
	})

	foreign := "192.168.9.9:8080/3,backup"
	f.expectBackends(classicLB, "api", fmt.Sprintf("10.0.20.1:%d/1", apiPort))
	f.waitReady(obj, v1beta1.ReasonWriteRefused, func(_ *v1beta1.LBRegistrar, ready *metav1.Condition) error {
		if !strings.Contains(ready.Message, `backend set "web"`) {
			return fmt.Errorf("Ready does not name backend set web: %s", ready.Message)
		}
		return nil
	})
	f.expectBackends(classicLB, "web", foreign)
	apiWrites := f.writesTo(classicLB, "api")

	f.emu.RemoveFault(fault)
	f.expectBackends(classicLB, "web", foreign,
		fmt.Sprintf("10.0.20.1:%d/2", webPort), fmt.Sprintf("10.0.20.2:%d/2", webPort),
		fmt.Sprintf("10.0.20.1:%d/2", apiPort), fmt.Sprintf("10.0.20.2:%d/2", apiPort))
	f.waitReady(obj, v1beta1.ReasonRegistered, func(o *v1beta1.LBRegistrar, _ *metav1.Condition) error {
		if len(o.Status.BackendSets) != 2 {
			return fmt.Errorf("ownership record: %+v", o.Status.BackendSets)
		}
		return nil
	})
	f.expectBackends(classicLB, "api", fmt.Sprintf("10.0.20.1:%d/1", apiPort))
	if n := f.writesTo(classicLB, "api"); n != apiWrites || n != 1 {
		t.Errorf("backend set api written %d times, want once (before the failure) and never again", n)
	}
}

// writesTo counts the UpdateBackendSet calls OCI accepted for a backend set.
func (f *fixture) writesTo(lb, set string) int {
	n := 0
	for _, c := range f.emu.Calls() {
		if c.Operation == "UpdateBackendSet" && c.LoadBalancerID == lb && strings.HasSuffix(c.Path, "/backendSets/"+set) && c.WorkRequestID != "" {
			n++
		}
	}
	return n
}
