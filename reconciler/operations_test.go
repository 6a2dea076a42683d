package reconciler_test

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/peppy-ratio/lbregistrar/api/v1beta1"
	"github.com/peppy-ratio/lbregistrar/reconciler/debugview"
	"github.com/peppy-ratio/lbregistrar/reconciler/lanes"
	"github.com/peppy-ratio/lbregistrar/test/ociemu"
)

// The metrics server shows, while a work request runs, which resource has
// the load balancer's lane, the work request it waits for and who is
// parked; the logs name the load balancer, backend set and work request,
// and never the key.
func TestLanesEndpointAndLogs(t *testing.T) {
	f := newFixture(t, ociemu.Options{WorkRequestLatency: time.Hour}) // finished by hand
	f.node(f.ns+"-a", "10.0.17.1")
	addr := freeAddr(t)
	logs := &logLines{}
	f.startManager(f.options(), func(o *ctrl.Options) {
		o.Metrics.BindAddress = addr
		o.Logger = funcr.NewJSON(logs.add, funcr.Options{Verbosity: 1})
	})
	a := f.registrar("dbg-a", classicLB, []v1beta1.Target{fixedPort("api", 30800)})
	b := f.registrar("dbg-b", classicLB, []v1beta1.Target{fixedPort("admin", 30800)})

	var lane lanes.Status
	f.eventually(10*time.Second, func() error {
		view, err := getLanes(addr)
		if err != nil {
			return err
		}
		if !view.Leader || len(view.LoadBalancers) != 1 {
			return fmt.Errorf("view: %+v", view)
		}
		lane = view.LoadBalancers[0]
		if lane.Step.Phase != lanes.Waiting || len(lane.Parked) != 1 {
			return fmt.Errorf("lane: %+v", lane)
		}
		return nil
	})
	laneTaker, set, waiter := a, "api", b
	if lane.LBRegistrar == b.Name {
		laneTaker, set, waiter = b, "admin", a
	}
	wrs := f.emu.WorkRequests()
	if lane.LoadBalancerID != classicLB || lane.LBRegistrar != laneTaker.Name || lane.Step.BackendSet != set ||
		len(wrs) != 1 || lane.Step.WorkRequest != wrs[0].ID || lane.Parked[0].Name != waiter.Name {
		t.Fatalf("lane %+v, work requests %+v", lane, wrs)
	}

	f.eventually(20*time.Second, func() error {
		f.emu.FinishWorkRequests()
		if n := len(f.emu.WorkRequests()); n != 2 {
			return fmt.Errorf("%d work requests", n)
		}
		view, err := getLanes(addr)
		if err != nil || len(view.LoadBalancers) != 0 {
			return fmt.Errorf("lanes still busy: %+v, %w", view, err)
		}
		return nil
	})
	f.expectBackends(classicLB, "api", "10.0.17.1:30800/1")
	f.expectBackends(classicLB, "admin", "10.0.17.1:30800/1")

	updated := logs.matching("backend set updated")
	if len(updated) != 2 {
		t.Fatalf("%d completion lines, want 2:\n%s", len(updated), logs)
	}
	for _, m := range updated {
		if m["loadBalancer"] != classicLB || m["backendSet"] == nil || m["workRequest"] == nil || m["duration"] == nil {
			t.Errorf("completion line missing keys: %v", m)
		}
		if r, _ := m["LBRegistrar"].(map[string]any); r == nil || (r["name"] != a.Name && r["name"] != b.Name) {
			t.Errorf("completion line without the resource: %v", m)
		}
	}
	if done := updated[0]; done["workRequest"] != wrs[0].ID || done["LBRegistrar"].(map[string]any)["name"] != laneTaker.Name {
		t.Errorf("first completion %v, want work request %s of %s", done, wrs[0].ID, laneTaker.Name)
	}

	// Deletion needs its work requests finished too.
	f.must(k8s.Delete(f.ctx, a))
	f.must(k8s.Delete(f.ctx, b))
	f.eventually(20*time.Second, func() error {
		f.emu.FinishWorkRequests()
		for _, o := range []*v1beta1.LBRegistrar{a, b} {
			if err := k8s.Get(f.ctx, client.ObjectKeyFromObject(o), &v1beta1.LBRegistrar{}); err == nil {
				return fmt.Errorf("%s still present", o.Name)
			}
		}
		return nil
	})
	if len(logs.matching("deregistered; removing the finalizer")) != 2 {
		t.Errorf("no deletion lines:\n%s", logs)
	}
	keyLines := strings.Split(strings.TrimSpace(string(f.keyPEM)), "\n")
	if secret := keyLines[len(keyLines)/2]; strings.Contains(logs.String(), secret) {
		t.Fatal("the private key appears in the logs")
	}
}

// A key that cannot be used is logged as an error naming the load balancer
// and the reason, and nothing of the key's content.
func TestCredentialProblemLoggedWithoutKeyMaterial(t *testing.T) {
	f := newFixture(t, ociemu.Options{})
	body := base64.StdEncoding.EncodeToString([]byte("not-a-key-5c1e07"))
	f.applySecret("bad-key", []byte("-----BEGIN RSA PRIVATE KEY-----\n"+body+"\n-----END RSA PRIVATE KEY-----\n"))
	logs := &logLines{}
	f.startManager(f.options(), func(o *ctrl.Options) { o.Logger = funcr.NewJSON(logs.add, funcr.Options{Verbosity: 1}) })
	bad := f.key
	bad.PrivateKey.SecretKeyRef.Name = "bad-key"
	obj := f.registrar("badkey", classicLB, []v1beta1.Target{fixedPort("api", 30810)}, func(o *v1beta1.LBRegistrar) { o.Spec.APIKey = bad.DeepCopy() })

	f.eventually(10*time.Second, func() error {
		for _, m := range logs.matching("the credentials cannot be used") {
			if m["loadBalancer"] == classicLB && m["reason"] == "InvalidCredentials" && m["error"] != nil &&
				m["LBRegistrar"].(map[string]any)["name"] == obj.Name {
				return nil
			}
		}
		return fmt.Errorf("no credential error line:\n%s", logs)
	})
	if all := logs.String(); strings.Contains(all, body) || strings.Contains(all, "not-a-key-5c1e07") {
		t.Fatalf("the key's content appears in the logs:\n%s", all)
	}
}

func getLanes(addr string) (debugview.View, error) {
	var v debugview.View
	resp, err := http.Get("http://" + addr + debugview.Path)
	if err != nil {
		return v, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return v, fmt.Errorf("GET %s: %s", debugview.Path, resp.Status)
	}
	return v, json.NewDecoder(resp.Body).Decode(&v)
}

// freeAddr returns a loopback address with a port free at the time of the call.
func freeAddr(t *testing.T) string {
	t.Helper()
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(int(freePort(t))))
}

// logLines keeps JSON log lines.
type logLines struct {
	mu    sync.Mutex
	lines []string
}

func (l *logLines) add(line string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines = append(l.lines, line)
}

func (l *logLines) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.lines, "\n")
}

// matching decodes the lines whose message starts with msg, in order.
func (l *logLines) matching(msg string) []map[string]any {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []map[string]any
	for _, line := range l.lines {
		var m map[string]any
		if json.NewDecoder(bytes.NewReader([]byte(line))).Decode(&m) == nil && strings.HasPrefix(fmt.Sprint(m["msg"]), msg) {
			out = append(out, m)
		}
	}
	return out
}
