package reconciler_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/cli-utils/pkg/kstatus/status"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/peppy-ratio/lbregistrar/api/v1beta1"
	"github.com/peppy-ratio/lbregistrar/test/gitops"
	"github.com/peppy-ratio/lbregistrar/test/ociemu"
)

// What Flux and kpt (the kstatus library) and Argo CD (the shipped Lua
// health check, run by gopher-lua, the interpreter Argo CD embeds) make of
// each state, read from the API server: registering is in progress; a
// conflict, an identity the controller may not use and a write OCI refused
// need a person and fail at once rather than after an apply's timeout,
// also beside a backend set held for a missing Service; converged is
// current and healthy; suspended keeps its verdict and Argo CD says
// Suspended; deleting is terminating. status/verdict_test.go reads every
// state and combination; this test reads them as the controller writes
// them.
func TestGitOpsToolsReadEveryState(t *testing.T) {
	f := newFixture(t, ociemu.Options{})
	f.node(f.ns+"-a", "10.0.42.1")
	f.emu.AddFault(ociemu.Fault{Operation: "UpdateBackendSet", LoadBalancerID: classicLB, BackendSet: "admin", Status: 400, Code: "InvalidParameter"})
	stuck := f.emu.AddFault(ociemu.Fault{Operation: "UpdateBackendSet", LoadBalancerID: networkLB, StuckUpdating: true})
	o := f.options()
	o.DrainPeriod = time.Hour
	f.startManager(o)

	converged := f.registrar("converged", classicLB, []v1beta1.Target{fixedPort("web", 30450)})
	f.waitReady(converged, v1beta1.ReasonRegistered)
	f.waitServerClockPast(f.get(converged).CreationTimestamp) // the older claim wins
	registering := f.registrar("registering", networkLB, []v1beta1.Target{fixedPort("tcp", 30451)})
	conflict := f.registrar("conflict", classicLB, []v1beta1.Target{fixedPort("web", 30452)})
	heldToo := f.registrar("conflict-held", classicLB, []v1beta1.Target{fixedPort("web", 30456),
		{Namespace: f.ns, Name: "absent", Port: ptr.To(intstr.FromInt32(80)), BackendSetName: "api", Weight: 1}})
	refused := f.registrar("refused", classicLB, []v1beta1.Target{fixedPort("admin", 30453)})
	suspended := f.registrar("suspended", classicLB, []v1beta1.Target{fixedPort("health", 30454)}, func(o *v1beta1.LBRegistrar) { o.Spec.Suspend = true })
	identity := f.registrar("identity", classicLB, []v1beta1.Target{fixedPort("api", 30455)}, func(o *v1beta1.LBRegistrar) {
		o.Spec.APIKey, o.Spec.InstancePrincipal = nil, &v1beta1.InstancePrincipal{Region: "us-ashburn-1"}
	})

	expect := func(obj *v1beta1.LBRegistrar, want status.Status, says, argo string) {
		t.Helper()
		f.eventually(30*time.Second, func() error {
			u := &unstructured.Unstructured{}
			u.SetGroupVersionKind(v1beta1.GroupVersion.WithKind("LBRegistrar"))
			if err := f.api.Get(f.ctx, client.ObjectKeyFromObject(obj), u); err != nil {
				return err
			}
			v, err := gitops.Read(u)
			if err != nil {
				return err
			}
			if v.KStatus != want || v.Argo != argo || !strings.Contains(v.KMessage, says) || !strings.Contains(v.ArgoMessage, says) {
				return fmt.Errorf("%s: %s; want kstatus %s and Argo CD %s saying %q", obj.Name, v, want, argo, says)
			}
			return nil
		})
	}
	expect(converged, status.CurrentStatus, "", "Healthy")
	expect(registering, status.InProgressStatus, "", "Progressing")
	expect(conflict, status.FailedStatus, "belongs to LBRegistrar "+converged.Name, "Degraded")
	expect(heldToo, status.FailedStatus, "belongs to LBRegistrar "+converged.Name, "Degraded")
	expect(refused, status.FailedStatus, "OCI refused", "Degraded")
	expect(suspended, status.CurrentStatus, "", "Suspended")
	expect(identity, status.FailedStatus, "spec.instancePrincipal", "Degraded")

	f.emu.RemoveFault(stuck)
	expect(registering, status.CurrentStatus, "", "Healthy")
	f.updateRegistrar(registering, func(o *v1beta1.LBRegistrar) { o.Spec.Suspend = true })
	expect(registering, status.CurrentStatus, "", "Suspended")
	f.must(f.api.Delete(f.ctx, converged))
	expect(converged, status.TerminatingStatus, "", "Progressing")
	f.updateRegistrar(converged, func(o *v1beta1.LBRegistrar) { o.Finalizers = nil }) // its drain would last the hour
}
