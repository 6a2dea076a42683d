// Package gitops reads an LBRegistrar as the GitOps tools do: the kstatus
// library (Flux, kpt) and the shipped Argo CD health check, run by
// gopher-lua, the interpreter Argo CD embeds.
package gitops

import (
	"fmt"
	"path/filepath"
	"runtime"

	lua "github.com/yuin/gopher-lua"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/cli-utils/pkg/kstatus/status"
)

// Verdict is what the tools make of one object.
type Verdict struct {
	KStatus     status.Status
	KMessage    string
	Argo        string
	ArgoMessage string
}

// Read is the verdict of u.
func Read(u *unstructured.Unstructured) (Verdict, error) {
	res, err := status.Compute(u)
	if err != nil {
		return Verdict{}, err
	}
	health, message, err := ArgoHealth(u)
	return Verdict{KStatus: res.Status, KMessage: res.Message, Argo: health, ArgoMessage: message}, err
}

// Agree reports whether kstatus and Argo CD say the same of an object
// whose spec.suspend is false: Current is Healthy, InProgress and
// Terminating are Progressing (Argo CD has no Terminating), Failed is
// Degraded.
func (v Verdict) Agree() bool {
	want := map[status.Status]string{
		status.CurrentStatus:     "Healthy",
		status.InProgressStatus:  "Progressing",
		status.TerminatingStatus: "Progressing",
		status.FailedStatus:      "Degraded",
	}
	return want[v.KStatus] == v.Argo
}

func (v Verdict) String() string {
	return fmt.Sprintf("kstatus %s %q, Argo CD %s %q", v.KStatus, v.KMessage, v.Argo, v.ArgoMessage)
}

// script is config/argocd/health.lua, found from this file.
func script() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", "config", "argocd", "health.lua")
}

// ArgoHealth runs config/argocd/health.lua on u, as Argo CD does: u is the
// global obj, and the script returns the health.
func ArgoHealth(u *unstructured.Unstructured) (health, message string, err error) {
	L := lua.NewState()
	defer L.Close()
	L.SetGlobal("obj", toLua(L, u.Object))
	if err := L.DoFile(script()); err != nil {
		return "", "", err
	}
	hs, ok := L.Get(-1).(*lua.LTable)
	if !ok {
		return "", "", fmt.Errorf("the health check returned %s, not a table", L.Get(-1).Type())
	}
	return L.GetField(hs, "status").String(), L.GetField(hs, "message").String(), nil
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
