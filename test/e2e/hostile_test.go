package e2e

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/peppy-ratio/lbregistrar/api/v1alpha1"
	"github.com/peppy-ratio/lbregistrar/test/eventually"
	"github.com/peppy-ratio/lbregistrar/test/forge"
	"github.com/peppy-ratio/lbregistrar/test/kube"
)

// peakRSSBound is the most memory serve may hold resident under the hostile
// traffic below, run with the GOMEMLIMIT the Deployment sets;
// docs/operations.md states both beside the Deployment's memory limit.
const (
	peakRSSBound = 320 << 20
	goMemLimit   = "GOMEMLIMIT=256MiB"
)

// TestHostileTraffic throws at every listener of the real serve binary what
// a caller with no credentials at all can send: lying Content-Lengths, slow
// and truncated bodies, compressed bombs, huge and deep JSON, thousands of
// objects, wrong kinds and versions, random bytes and many connections, all
// at once. serve must stay up, within peakRSSBound, and afterwards answer
// well-formed requests correctly: the API server still admits and converts
// through it, and the controller still registers backends.
func TestHostileTraffic(t *testing.T) {
	c, emu := clusterWithWorkload(t, 0)
	serve := newServeProcess()
	serve.SecureMetrics = true
	serve.Env = []string{goMemLimit}
	serve.startAdmitting(t, c, emu)

	webhookTLS := &tls.Config{InsecureSkipVerify: true} //nolint:gosec // the attacker does not care who answers
	webhook := target{addr: serve.WebhookAddr, tls: webhookTLS}
	health := target{addr: serve.HealthAddr}
	metrics := target{addr: serve.MetricsAddr, tls: webhookTLS}
	alpha := seedJSON(t)
	bombs := reviewToBeta(strings.Repeat(","+string(withForgedHubData(t, alpha)), 200)[1:])
	manyObjects := reviewToBeta(strings.Repeat(","+string(alpha), 30000)[1:])
	oversized := reviewToBeta(`"` + strings.Repeat("a", 33<<20) + `"`)

	attacks := map[string]func() error{
		"Content-Length of a terabyte": func() error {
			return webhook.expect(post("/convert", reviewToBeta(string(alpha)), "Content-Length: 1099511627776"), 413)
		},
		"negative Content-Length": func() error {
			return webhook.expect(post("/convert", reviewToBeta(string(alpha)), "Content-Length: -1"), 400)
		},
		"Content-Length shorter than the body": func() error {
			return webhook.expect(post("/convert", reviewToBeta(string(alpha)), "Content-Length: 10"), 400)
		},
		"truncated body": func() error {
			return webhook.send(post("/convert", reviewToBeta(string(alpha))[:100], fmt.Sprintf("Content-Length: %d", 100000)), 0)
		},
		"slow bodies": repeat(40, func(int) error {
			return webhook.send(post("/convert", reviewToBeta(string(alpha)), ""), 50*time.Millisecond)
		}),
		"compressed bombs in a conversion": repeat(8, func(int) error {
			return webhook.expectBody(post("/convert", bombs, ""), 0, "convert fewer objects at a time", "busy")
		}),
		"compressed bomb in an admission": repeat(8, func(int) error {
			return webhook.expectBody(post("/validate-nodes-peppy-ratio-dev-v1alpha1-lbregistrar", admissionReview(withForgedHubData(t, alpha)), ""),
				0, "written only by conversion", "busy")
		}),
		"thousands of objects": repeat(8, func(int) error {
			return webhook.expectBody(post("/convert", manyObjects, ""), 0, `"status":"Success"`, "busy")
		}),
		"a body past the limit": func() error {
			return webhook.expect(post("/convert", oversized, ""), 413)
		},
		"a chunked body past the limit": func() error {
			return webhook.send(postChunked("/convert", oversized), 0)
		},
		"deep JSON": func() error {
			return webhook.expect(post("/convert", reviewToBeta(strings.Repeat("[", 100000)), ""), 400)
		},
		"gzip-encoded body": func() error {
			return webhook.expect(post("/convert", string(forge.Gzip(reviewToBeta(string(alpha)))), "Content-Encoding: gzip"), 400)
		},
		"wrong kinds and versions": func() error {
			for _, body := range []string{
				reviewToBeta(`{"apiVersion":"nodes.peppy-ratio.dev/v9","kind":"LBRegistrar"}`),
				reviewToBeta(`{"apiVersion":"v1","kind":"Pod"}`),
				strings.Replace(reviewToBeta(string(alpha)), "apiextensions.k8s.io/v1", "apiextensions.k8s.io/v1beta1", 1),
				strings.Replace(admissionReview(alpha), `"kind":"LBRegistrar"`, `"kind":"Pod"`, 1),
			} {
				if err := webhook.send(post("/convert", body, ""), 0); err != nil {
					return err
				}
				if err := webhook.send(post("/validate-nodes-peppy-ratio-dev-v1beta1-lbregistrar", body, ""), 0); err != nil {
					return err
				}
			}
			return nil
		},
		"random bodies": repeat(4, func(i int) error {
			r := rand.New(rand.NewPCG(uint64(i), 1))
			for range 25 {
				body := make([]byte, r.IntN(1<<20))
				for j := range body {
					body[j] = byte(r.Uint32())
				}
				path := []string{"/convert", "/validate-nodes-peppy-ratio-dev-v1alpha1-lbregistrar", "/", "/%00"}[r.IntN(4)]
				if err := webhook.send(post(path, string(body), ""), 0); err != nil {
					return err
				}
			}
			return nil
		}),
		"random bytes instead of TLS": repeat(20, func(i int) error {
			return target{addr: serve.WebhookAddr}.send(randomBytes(i, 64<<10), 0)
		}),
		"random bytes on the plain listeners": repeat(20, func(i int) error {
			return errorsOf(health.send(randomBytes(i, 64<<10), 0), target{addr: serve.MetricsAddr}.send(randomBytes(i, 64<<10), 0))
		}),
		"huge headers": func() error {
			header := "X-A: " + strings.Repeat("a", 2<<20)
			return errorsOf(webhook.expect(post("/convert", "{}", header), 431), health.expect(get("/healthz", header), 431),
				metrics.expect(get("/metrics", header), 431))
		},
		"a terabyte to the probes": func() error {
			return health.send(post("/readyz", "{}", "Content-Length: 1099511627776"), 0)
		},
		"tokens the API server never issued": repeat(50, func(i int) error {
			// controller-runtime's filter answers an unknown token 500.
			return errorsOf(metrics.expectBody(get("/metrics", fmt.Sprintf("Authorization: Bearer forged-%d", i)), 0, "Authentication failed"),
				metrics.expect(get("/debug/lanes", ""), 401))
		}),
		"many connections": func() error {
			return errorsOf(webhook.hold(2000, 5*time.Second), health.hold(500, 5*time.Second), metrics.hold(500, 5*time.Second))
		},
	}

	var wg sync.WaitGroup
	failures := make(chan string, len(attacks))
	for name, attack := range attacks {
		wg.Go(func() {
			if err := attack(); err != nil {
				failures <- fmt.Sprintf("%s: %v", name, err)
			}
		})
	}
	wg.Wait()
	close(failures)
	for f := range failures {
		t.Error(f)
	}

	select {
	case <-serve.Done():
		t.Fatalf("serve exited under hostile traffic: %v", serve.Err())
	default:
	}
	peak, err := serve.PeakRSS()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("peak RSS %d MiB (bound %d MiB)", peak>>20, peakRSSBound>>20)
	if peak > peakRSSBound {
		t.Errorf("peak RSS %d MiB, past the stated bound of %d MiB", peak>>20, peakRSSBound>>20)
	}

	// Afterwards: the API server admits, stores and converts through serve,
	// and the controller registers.
	if err := webhook.expectBody(post("/convert", reviewToBeta(string(alpha)), ""), 200, `"status":"Success"`); err != nil {
		t.Error(err)
	}
	kubectl(t, c, apiKeyFor(t, c, emu, classicIngressRegistrar), "apply", "-f", "-")
	kubectl(t, c, "", "get", "lbregistrars.v1alpha1.nodes.peppy-ratio.dev", "legit")
	eventually.Passes(t, 60*time.Second, 200*time.Millisecond, func() error {
		if got := backendsOf(t, emu, classicIngress, "ingress"); len(got) != 3 {
			return fmt.Errorf("backends %q", got)
		}
		return nil
	})
}

// The bound the harness holds serve to is the one docs/operations.md
// states, with the GOMEMLIMIT the Deployment sets.
func TestStatedMemoryBound(t *testing.T) {
	root, err := kube.FindRoot()
	if err != nil {
		t.Fatal(err)
	}
	name, value, _ := strings.Cut(goMemLimit, "=")
	for file, wants := range map[string][]string{
		"docs/operations.md":             {fmt.Sprintf("peak RSS at most %d MiB", peakRSSBound>>20), "`" + goMemLimit + "`"},
		"config/manager/deployment.yaml": {"- name: " + name + "\n          value: " + value + "\n"},
		"charts/lbregistrar/values.yaml": {"goMemLimit: " + value + "\n"},
	} {
		data, err := os.ReadFile(filepath.Join(root, file))
		if err != nil {
			t.Fatal(err)
		}
		for _, want := range wants {
			if !bytes.Contains(data, []byte(want)) {
				t.Errorf("%s does not state %q", file, want)
			}
		}
	}
}

// target is one of serve's listeners, spoken to over raw connections.
type target struct {
	addr string
	tls  *tls.Config // nil: plain
}

func (tg target) dial() (net.Conn, error) {
	conn, err := net.DialTimeout("tcp", tg.addr, 10*time.Second)
	if err != nil || tg.tls == nil {
		return conn, err
	}
	tc := tls.Client(conn, tg.tls)
	_ = tc.SetDeadline(time.Now().Add(10 * time.Second))
	if err := tc.Handshake(); err != nil {
		_ = conn.Close()
		return nil, err
	}
	return tc, nil
}

// send writes request, a pause between bytes when pace is set, and reads
// whatever comes back; a listener that closes the connection is fine, one
// that does not accept it is not.
func (tg target) send(request string, pace time.Duration) error {
	_, _, err := tg.exchange(request, pace)
	return err
}

// exchange is send that returns the answer's status and body (0 when none
// came). The request is written while the answer is read, since a server
// may answer (413, 431) before it has read all of it.
func (tg target) exchange(request string, pace time.Duration) (int, string, error) {
	conn, err := tg.dial()
	if err != nil {
		return 0, "", fmt.Errorf("dial %s: %w", tg.addr, err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(60 * time.Second))
	go func() {
		if pace == 0 {
			_, _ = io.WriteString(conn, request)
			return
		}
		// Headers and most of the body at once, the rest slowly.
		cut := max(len(request)-100, 0)
		if _, err := io.WriteString(conn, request[:cut]); err != nil {
			return
		}
		for i := cut; i < len(request); i++ {
			if _, err := conn.Write([]byte{request[i]}); err != nil {
				return
			}
			time.Sleep(pace)
		}
	}()
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		return 0, "", nil // closed without an answer
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	return resp.StatusCode, string(body), nil
}

// expect sends request and wants status back.
func (tg target) expect(request string, status int) error {
	return tg.expectBody(request, status)
}

// expectBody sends request and wants status back (any, when 0), with a
// body containing one of texts when any are given.
func (tg target) expectBody(request string, status int, texts ...string) error {
	got, body, err := tg.exchange(request, 0)
	if err != nil {
		return err
	}
	shown := body
	if len(shown) > 600 {
		shown = shown[:300] + "…" + shown[len(shown)-300:]
	}
	if got != status && (status != 0 || got == 0) {
		return fmt.Errorf("status %d, want %d: %s", got, status, shown)
	}
	for _, text := range texts {
		if strings.Contains(body, text) {
			return nil
		}
	}
	if len(texts) > 0 {
		return fmt.Errorf("answer has none of %q: %s", texts, shown)
	}
	return nil
}

// hold opens n connections, keeps them idle for d, and closes them; the
// listener may make some wait to be accepted.
func (tg target) hold(n int, d time.Duration) error {
	var conns []net.Conn
	defer func() {
		for _, c := range conns {
			_ = c.Close()
		}
	}()
	for range n {
		conn, err := net.DialTimeout("tcp", tg.addr, 10*time.Second)
		if err != nil {
			return fmt.Errorf("connection %d of %d: %w", len(conns)+1, n, err)
		}
		conns = append(conns, conn)
	}
	time.Sleep(d)
	return nil
}

func post(path, body, header string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "POST %s HTTP/1.1\r\nHost: lbregistrar\r\nContent-Type: application/json\r\nConnection: close\r\n", path)
	if header != "" {
		b.WriteString(header + "\r\n")
	}
	if !strings.Contains(header, "Content-Length") {
		fmt.Fprintf(&b, "Content-Length: %d\r\n", len(body))
	}
	return b.String() + "\r\n" + body
}

// postChunked is post with a body of unknown length, sent in one chunk.
func postChunked(path, body string) string {
	return fmt.Sprintf("POST %s HTTP/1.1\r\nHost: lbregistrar\r\nContent-Type: application/json\r\nConnection: close\r\nTransfer-Encoding: chunked\r\n\r\n%x\r\n%s\r\n0\r\n\r\n",
		path, len(body), body)
}

func get(path, header string) string {
	request := "GET " + path + " HTTP/1.1\r\nHost: lbregistrar\r\nConnection: close\r\n"
	if header != "" {
		request += header + "\r\n"
	}
	return request + "\r\n"
}

func reviewToBeta(objects string) string {
	return `{"kind":"ConversionReview","apiVersion":"apiextensions.k8s.io/v1","request":{"uid":"u-1","desiredAPIVersion":"nodes.peppy-ratio.dev/v1beta1","objects":[` +
		objects + `]}}`
}

func admissionReview(object []byte) string {
	return `{"kind":"AdmissionReview","apiVersion":"admission.k8s.io/v1","request":{"uid":"u-1","kind":{"group":"nodes.peppy-ratio.dev","version":"v1alpha1","kind":"LBRegistrar"},` +
		`"resource":{"group":"nodes.peppy-ratio.dev","version":"v1alpha1","resource":"lbregistrars"},"name":"seed","operation":"CREATE",` +
		`"userInfo":{"username":"mallory"},"object":` + string(object) + `}}`
}

// seedJSON is the v1alpha1 seed resource as JSON.
func seedJSON(t *testing.T) []byte {
	t.Helper()
	data, err := yaml.YAMLToJSON([]byte(testdata(t, "seed000-single-service.yaml")))
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// withForgedHubData is the v1alpha1 object alpha with a conversion
// annotation no conversion wrote (forge.HubData).
func withForgedHubData(t *testing.T, alpha []byte) []byte {
	t.Helper()
	var obj map[string]any
	if err := json.Unmarshal(alpha, &obj); err != nil {
		t.Fatal(err)
	}
	obj["metadata"].(map[string]any)["annotations"] = map[string]any{v1alpha1.HubDataAnnotation: forge.HubData()}
	data, err := json.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func randomBytes(seed, n int) string {
	r := rand.New(rand.NewPCG(uint64(seed), 2))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return string(b)
}

// repeat runs attack n times at once.
func repeat(n int, attack func(i int) error) func() error {
	return func() error {
		errs := make(chan error, n)
		for i := range n {
			go func() { errs <- attack(i) }()
		}
		var all []error
		for range n {
			if err := <-errs; err != nil {
				all = append(all, err)
			}
		}
		return errorsOf(all...)
	}
}

func errorsOf(errs ...error) error {
	var msgs []string
	for _, err := range errs {
		if err != nil {
			msgs = append(msgs, err.Error())
		}
	}
	if len(msgs) == 0 {
		return nil
	}
	return fmt.Errorf("%s", strings.Join(msgs, "; "))
}
