package reconciler_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/cli-utils/pkg/kstatus/status"
	"sigs.k8s.io/controller-runtime/pkg/client"

	lua "github.com/yuin/gopher-lua"

	"github.com/peppy-ratio/lbregistrar/api/v1beta1"
	"github.com/peppy-ratio/lbregistrar/test/ociemu"
)

// What Flux and kpt (the kstatus library) and Argo CD (the shipped Lua
// health check, run by gopher-lua, the interpreter Argo CD embeds) make of
// each state, read from the API server: registering is in progress; a
// conflict, an identity the controller may not use and a write OCI refused
// need a person and fail at once rather than after an apply's timeout;
// converged is current and healthy; suspended says so; deleting is
// terminating.
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
			res, err := status.Compute(u)
			if err != nil {
				return err
			}
			if res.Status != want || !strings.Contains(res.Message, says) {
				return fmt.Errorf("%s: kstatus %s %q, want %s saying %q", obj.Name, res.Status, res.Message, want, says)
			}
			if health, message := argoHealth(t, u); health != argo || !strings.Contains(message, says) {
				return fmt.Errorf("%s: Argo CD health %s %q, want %s saying %q", obj.Name, health, message, argo, says)
			}
			return nil
		})
	}
	expect(converged, status.CurrentStatus, "", "Healthy")
	expect(registering, status.InProgressStatus, "", "Progressing")
	expect(conflict, status.FailedStatus, "kept by LBRegistrar "+converged.Name, "Degraded")
	expect(refused, status.FailedStatus, "OCI refused", "Degraded")
	expect(suspended, status.InProgressStatus, "spec.suspend is true", "Suspended")
	expect(identity, status.FailedStatus, "spec.instancePrincipal", "Degraded")

	f.emu.RemoveFault(stuck)
	expect(registering, status.CurrentStatus, "", "Healthy")
	f.must(f.api.Delete(f.ctx, converged))
	expect(converged, status.TerminatingStatus, "", "Progressing")
	f.updateRegistrar(converged, func(o *v1beta1.LBRegistrar) { o.Finalizers = nil }) // its drain would last the hour
}

// argoHealth runs config/argocd/health.lua on u, as Argo CD does: u is the
// global obj, and the script returns the health.
func argoHealth(t *testing.T, u *unstructured.Unstructured) (health, message string) {
	t.Helper()
	L := lua.NewState()
	defer L.Close()
	L.SetGlobal("obj", toLua(L, u.Object))
	if err := L.DoFile("../config/argocd/health.lua"); err != nil {
		t.Fatal(err)
	}
	hs, ok := L.Get(-1).(*lua.LTable)
	if !ok {
		t.Fatalf("the health check returned %s, not a table", L.Get(-1).Type())
	}
	return L.GetField(hs, "status").String(), L.GetField(hs, "message").String()
}

// toLua is v (decoded JSON) as a Lua value.
func toLua(L *lua.LState, v any) lua.LValue {
	switch v := v.(type) {
	case map[string]any:
		t := L.NewTable()
		for k, e := range v {
			t.RawSetString(k, toLua(L, e))
		}
		return t
	case []any:
		t := L.NewTable()
		for _, e := range v {
			t.Append(toLua(L, e))
		}
		return t
	case string:
		return lua.LString(v)
	case bool:
		return lua.LBool(v)
	case int64:
		return lua.LNumber(v)
	case float64:
		return lua.LNumber(v)
	}
	return lua.LNil
}
