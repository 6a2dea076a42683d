package e2e

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/peppy-ratio/lbregistrar/api/v1alpha1"
	"github.com/peppy-ratio/lbregistrar/test/forge"
	"github.com/peppy-ratio/lbregistrar/test/kube"
)

// peakRSSBound is the most memory serve may have resident under the hostile
// traffic below, run with the GOMEMLIMIT the Deployment sets;
// docs/operations.md states both beside the Deployment's memory limit.
const (
	peakRSSBound = 320 << 20
	goMemLimit   = "GOMEMLIMIT=256MiB"
)

// TestHostileTraffic throws at every listener of the real serve binary what
// a caller with no credentials at all can send: lying Content-Lengths, slow
// and truncated bodies, compressed bombs, huge and deep JSON, thousands of
// objects, wrong kinds and versions, random bytes, idle, slow and
// handshake-less connections, many small headers, floods of made-up tokens
// and many connections from one source, all at once; then, alone, every
// connection slot asked to discard a body that never comes. Throughout, the
// kubelet's probes and the API server's admission reviews (from an address
// of their own, as in a cluster), and admission through the API server
// itself, must be answered within the timeouts the shipped manifests give
// them; serve must stay up, within peakRSSBound, make the API server
// review at most what the metrics port's limits allow, and afterwards
// answer well-formed requests correctly: the API server still admits and
// converts through it, and the controller still registers backends.
func TestHostileTraffic(t *testing.T) {
	fail := failLast(t)
	c, emu := clusterWithWorkload(t, 0)
	serve := newServeProcess()
	serve.SecureMetrics = true
	serve.Env = []string{goMemLimit}
	serve.startAdmitting(t, c, emu)

	webhookTLS := &tls.Config{InsecureSkipVerify: true} //nolint:gosec // the attacker does not care who answers
	listeners := attacker{
		webhook: target{addr: serve.WebhookAddr, tls: webhookTLS},
		health:  target{addr: serve.HealthAddr},
		metrics: target{addr: serve.MetricsAddr, tls: webhookTLS},
	}
	alpha := seedJSON(t)
	bombs := reviewToBeta(strings.Repeat(","+string(withForgedHubData(t, alpha)), 200)[1:])
	manyObjects := reviewToBeta(strings.Repeat(","+string(alpha), 10000)[1:])
	oversized := reviewToBeta(`"` + strings.Repeat("a", 17<<20) + `"`)
	tinyHeaders := func(size int) string { return strings.TrimSuffix(strings.Repeat("a:\r\n", size/4), "\r\n") }

	// Each attack comes from an address of its own but the heavy ones,
	// which share one: what one caller may occupy of the memory budget is
	// half, so the others and the API server find room beside them.
	attacks := []struct {
		name  string
		heavy bool
		run   func(a attacker) error
	}{
		{name: "Content-Length of a terabyte", run: func(a attacker) error {
			return a.webhook.expect(post("/convert", reviewToBeta(string(alpha)), "Content-Length: 1099511627776"), 413)
		}},
		{name: "negative Content-Length", run: func(a attacker) error {
			return a.webhook.expect(post("/convert", reviewToBeta(string(alpha)), "Content-Length: -1"), 400)
		}},
		{name: "Content-Length shorter than the body", run: func(a attacker) error {
			return a.webhook.expect(post("/convert", reviewToBeta(string(alpha)), "Content-Length: 10"), 400)
		}},
		{name: "truncated body", run: func(a attacker) error {
			return a.webhook.send(post("/convert", reviewToBeta(string(alpha))[:100], fmt.Sprintf("Content-Length: %d", 100000)), 0)
		}},
		{name: "slow bodies", run: repeat(40, func(a attacker, _ int) error {
			return a.webhook.send(post("/convert", reviewToBeta(string(alpha)), ""), 50*time.Millisecond)
		})},
		{name: "a chunked body trickling", run: func(a attacker) error {
			return a.webhook.send(postChunked("/convert", reviewToBeta(string(alpha))), 50*time.Millisecond)
		}},
		{name: "compressed bombs in a conversion", heavy: true, run: repeat(4, func(a attacker, _ int) error {
			return a.webhook.expectBody(post("/convert", bombs, ""), 0, "convert fewer objects at a time")
		})},
		{name: "compressed bomb in an admission", heavy: true, run: repeat(4, func(a attacker, _ int) error {
			return a.webhook.expectBody(post("/validate-nodes-peppy-ratio-dev-v1alpha1-lbregistrar", admissionReview(withForgedHubData(t, alpha)), ""),
				0, "written only by conversion")
		})},
		{name: "thousands of objects", heavy: true, run: repeat(4, func(a attacker, _ int) error {
			return a.webhook.expectBody(post("/convert", manyObjects, ""), 0, `"status":"Success"`)
		})},
		{name: "a body past the limit", heavy: true, run: func(a attacker) error {
			return a.webhook.expect(post("/convert", oversized, ""), 413)
		}},
		{name: "a chunked body past the limit", heavy: true, run: func(a attacker) error {
			return a.webhook.send(postChunked("/convert", oversized), 0)
		}},
		{name: "deep JSON", run: func(a attacker) error {
			return a.webhook.expect(post("/convert", reviewToBeta(strings.Repeat("[", 100000)), ""), 400)
		}},
		{name: "gzip-encoded body", run: func(a attacker) error {
			return a.webhook.expect(post("/convert", string(forge.Gzip(reviewToBeta(string(alpha)))), "Content-Encoding: gzip"), 400)
		}},
		{name: "wrong kinds and versions", run: func(a attacker) error {
			for _, body := range []string{
				reviewToBeta(`{"apiVersion":"nodes.peppy-ratio.dev/v9","kind":"LBRegistrar"}`),
				reviewToBeta(`{"apiVersion":"v1","kind":"Pod"}`),
				strings.Replace(reviewToBeta(string(alpha)), "apiextensions.k8s.io/v1", "apiextensions.k8s.io/v1beta1", 1),
				strings.Replace(admissionReview(alpha), `"kind":"LBRegistrar"`, `"kind":"Pod"`, 1),
			} {
				if err := a.webhook.send(post("/convert", body, ""), 0); err != nil {
					return err
				}
				if err := a.webhook.send(post("/validate-nodes-peppy-ratio-dev-v1beta1-lbregistrar", body, ""), 0); err != nil {
					return err
				}
			}
			return nil
		}},
		{name: "random bodies", run: repeat(4, func(a attacker, i int) error {
			r := rand.New(rand.NewPCG(uint64(i), 1))
			for range 25 {
				body := make([]byte, r.IntN(1<<20))
				for j := range body {
					body[j] = byte(r.Uint32())
				}
				path := []string{"/convert", "/validate-nodes-peppy-ratio-dev-v1alpha1-lbregistrar", "/", "/%00"}[r.IntN(4)]
				if err := a.webhook.send(post(path, string(body), ""), 0); err != nil {
					return err
				}
			}
			return nil
		})},
		{name: "random bytes instead of TLS", run: repeat(20, func(a attacker, i int) error {
			return a.webhook.plain().send(randomBytes(i, 64<<10), 0)
		})},
		{name: "random bytes on the plain listeners", run: repeat(20, func(a attacker, i int) error {
			return errorsOf(a.health.send(randomBytes(i, 64<<10), 0), a.metrics.plain().send(randomBytes(i, 64<<10), 0))
		})},
		{name: "huge headers", run: func(a attacker) error {
			header := "X-A: " + strings.Repeat("a", 2<<20)
			return errorsOf(a.webhook.refuses(post("/convert", "{}", header)), a.health.refuses(get("/healthz", header)),
				a.metrics.refuses(get("/metrics", header)))
		}},
		{name: "many small headers", run: func(a attacker) error {
			header := tinyHeaders(1 << 20)
			return errorsOf(a.webhook.refuses(post("/convert", "{}", header)), a.health.refuses(get("/healthz", header)),
				a.metrics.refuses(get("/metrics", header)))
		}},
		{name: "small headers just within the limit, the body never sent", run: func(a attacker) error {
			return a.webhook.keepRequestsOpen(200, post("/convert", "", tinyHeaders(7<<10)+"\r\nContent-Length: 16"), 10*time.Second)
		}},
		{name: "a terabyte to the probes", run: func(a attacker) error {
			return a.health.send(post("/readyz", "{}", "Content-Length: 1099511627776"), 0)
		}},
		// As many at once as the metrics port keeps from one source.
		{name: "tokens the API server never issued", run: repeat(4, func(a attacker, i int) error {
			return a.metrics.keepAsking(24, func(j int) string {
				if j%2 == 1 {
					return keepAlive(get("/debug/lanes", ""))
				}
				return keepAlive(get("/metrics", fmt.Sprintf("Authorization: Bearer forged-%d", (i+j)%5)))
			}, http.StatusUnauthorized, http.StatusTooManyRequests)
		})},
		{name: "a flood of made-up tokens", run: repeat(4, func(a attacker, i int) error {
			return a.metrics.keepAsking(madeUpTokens/4, func(j int) string {
				return keepAlive(get("/metrics", fmt.Sprintf("Authorization: Bearer flood-%d-%d", i, j)))
			}, http.StatusUnauthorized, http.StatusTooManyRequests)
		})},
		{name: "idle keep-alive connections", run: func(a attacker) error {
			return errorsOf(a.webhook.idle(300, "/convert", 8*time.Second), a.health.idle(300, "/healthz", 8*time.Second),
				a.metrics.idle(300, "/metrics", 8*time.Second))
		}},
		{name: "slow headers", run: func(a attacker) error {
			return errorsOf(a.webhook.slowHeaders(300, 8*time.Second), a.health.slowHeaders(300, 8*time.Second), a.metrics.slowHeaders(300, 8*time.Second))
		}},
		{name: "connections that never start TLS", run: func(a attacker) error {
			return a.webhook.plain().churn(768, 8*time.Second)
		}},
		{name: "many connections from one source", run: func(a attacker) error {
			return errorsOf(a.webhook.plain().churn(2000, 8*time.Second), a.health.churn(500, 8*time.Second), a.metrics.plain().churn(500, 8*time.Second))
		}},
	}
	reviewsBefore := tokenReviews(t, c)
	began := time.Now()
	stopWatching := watchServing(t, fail, listeners, admissionReview(alpha), throughTheAPIServer(t, c, alpha))
	var wg sync.WaitGroup
	failures := make(chan string, len(attacks))
	for i, attack := range attacks {
		source := fmt.Sprintf("127.0.1.%d", i+1)
		if attack.heavy {
			source = "127.0.0.2"
		}
		wg.Go(func() {
			if err := attack.run(listeners.from(source)); err != nil {
				failures <- fmt.Sprintf("%s: %v", attack.name, err)
			}
		})
	}
	wg.Wait()
	stopWatching()
	close(failures)
	for f := range failures {
		fail(f)
	}

	// Then alone, so that no other attack's waiting connections make
	// room: from four sources, as many connections each as the webhook
	// keeps from one (every slot it has), and as the metrics port keeps,
	// each declaring a body to a path that reads none and never sending it.
	stopWatching = watchServing(t, fail, listeners, admissionReview(alpha), throughTheAPIServer(t, c, alpha))
	unsent := make(chan error, 4)
	for i := range 4 {
		a := listeners.from(fmt.Sprintf("127.0.2.%d", i+1))
		go func() {
			unsent <- errorsOf(a.webhook.unsentBodies(64, "/nowhere", 8*time.Second), a.metrics.unsentBodies(8, "/nowhere", 8*time.Second))
		}()
	}
	for range 4 {
		if err := <-unsent; err != nil {
			fail("bodies declared to paths that read none, never sent: " + err.Error())
		}
	}
	stopWatching()

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
		fail(fmt.Sprintf("peak RSS %d MiB, past the stated bound of %d MiB", peak>>20, peakRSSBound>>20))
	}
	// tokenauth.Defaults: 10 at once, then 5 a second, whoever sends them.
	reviews, bound := tokenReviews(t, c)-reviewsBefore, 10+5*int(time.Since(began).Seconds()+1)
	t.Logf("%d made-up tokens and more cost the API server %d token reviews in %s (bound %d)", madeUpTokens, reviews, time.Since(began).Round(time.Second), bound)
	if reviews > bound {
		fail(fmt.Sprintf("the metrics port made the API server review %d tokens, past the %d its limits allow", reviews, bound))
	}

	// Afterwards: the API server admits, stores and converts through serve,
	// and the controller registers.
	if err := listeners.webhook.expectBody(post("/convert", reviewToBeta(string(alpha)), ""), 200, `"status":"Success"`); err != nil {
		t.Error(err)
	}
	registerLegit(t, c, emu)
	kubectl(t, c, "", "get", "lbregistrars.v1alpha1.nodes.peppy-ratio.dev", "legit")
}

// madeUpTokens is how many distinct tokens the flood sends the metrics port.
const madeUpTokens = 1000

// watchServing does, until the returned function is called, what the
// kubelet and the API server do, from 127.0.0.1: probes /healthz and
// /readyz on a new connection each, and sends a well-formed admission
// review; and it asks the API server itself to admit (admit); each must be
// answered within the timeout the shipped manifests give it (the
// Deployment's probes, the webhook configuration's timeoutSeconds). The
// returned function calls fail for every answer that was late or wrong,
// and logs the slowest of each.
func watchServing(t *testing.T, fail func(string), listeners attacker, review string, admit func() error) (stop func()) {
	t.Helper()
	probeTimeout, admissionTimeout := shippedTimeouts(t)
	done := make(chan struct{})
	var mu sync.Mutex
	var late []string
	slowest := map[string]time.Duration{}
	check := func(name string, timeout time.Duration, every time.Duration, ask func() (time.Duration, error)) {
		for {
			start := time.Now()
			connected, err := ask()
			took := time.Since(start)
			mu.Lock()
			slowest[name] = max(slowest[name], took)
			slowest[name+" (connecting)"] = max(slowest[name+" (connecting)"], connected)
			if err != nil || took > timeout {
				late = append(late, fmt.Sprintf("%s at %s: answered in %s, connected in %s (timeout %s): %v", name,
					start.Format("15:04:05.000"), took.Round(time.Millisecond), connected.Round(time.Millisecond), timeout, err))
			}
			mu.Unlock()
			select {
			case <-done:
				return
			case <-time.After(every):
			}
		}
	}
	var wg sync.WaitGroup
	kubelet, apiServer := listeners.from("127.0.0.1"), listeners.from("127.0.0.1")
	kubelet.health.timeout, apiServer.webhook.timeout = probeTimeout, admissionTimeout
	for _, path := range []string{"/healthz", "/readyz"} {
		wg.Go(func() {
			check(path, probeTimeout, 250*time.Millisecond, func() (time.Duration, error) {
				return kubelet.health.answers(get(path, ""), 200, "ok")
			})
		})
	}
	wg.Go(func() {
		check("admission review", admissionTimeout, time.Second, func() (time.Duration, error) {
			return apiServer.webhook.answers(post("/validate-nodes-peppy-ratio-dev-v1alpha1-lbregistrar", review, ""), 200, `"response"`)
		})
	})
	wg.Go(func() {
		check("admission through the API server", admissionTimeout, time.Second, func() (time.Duration, error) { return 0, admit() })
	})
	return func() {
		close(done)
		wg.Wait()
		t.Logf("slowest answers while attacked: %v", slowest)
		for _, l := range late {
			fail(l)
		}
	}
}

// throughTheAPIServer creates the v1alpha1 object alpha (JSON) in a dry
// run, which the API server admits through serve's webhooks.
func throughTheAPIServer(t *testing.T, c *kube.Cluster, alpha []byte) func() error {
	t.Helper()
	return func() error {
		obj := &unstructured.Unstructured{}
		if err := obj.UnmarshalJSON(alpha); err != nil {
			return err
		}
		obj.SetName("")
		obj.SetGenerateName("admitted-")
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		return c.Client.Create(ctx, obj, client.DryRunAll)
	}
}

// shippedTimeouts are the probe timeout of the shipped Deployment (the
// kubelet's default of 1 s when it sets none) and the validating webhooks'
// timeoutSeconds.
func shippedTimeouts(t *testing.T) (probe, admission time.Duration) {
	t.Helper()
	var deployment appsv1.Deployment
	if err := yaml.Unmarshal([]byte(readRootFile(t, "config/manager/deployment.yaml")), &deployment); err != nil {
		t.Fatal(err)
	}
	probe = time.Second
	if s := deployment.Spec.Template.Spec.Containers[0].ReadinessProbe.TimeoutSeconds; s > 0 {
		probe = time.Duration(s) * time.Second
	}
	admission = 30 * time.Second
	for doc := range strings.SplitSeq(readRootFile(t, "config/webhook/manifests.yaml"), "\n---") {
		var config admissionregistrationv1.ValidatingWebhookConfiguration
		if err := yaml.Unmarshal([]byte(doc), &config); err != nil {
			t.Fatal(err)
		}
		for _, w := range config.Webhooks {
			if w.TimeoutSeconds != nil {
				admission = min(admission, time.Duration(*w.TimeoutSeconds)*time.Second)
			}
		}
	}
	return probe, admission
}

// tokenReviews is how many TokenReviews the API server has been asked
// (apiserver_request_total).
func tokenReviews(t *testing.T, c *kube.Cluster) int {
	t.Helper()
	metrics, _ := kubectl(t, c, "", "get", "--raw", "/metrics")
	total := 0
	for line := range strings.Lines(metrics) {
		if strings.HasPrefix(line, "apiserver_request_total{") && strings.Contains(line, `resource="tokenreviews"`) {
			fields := strings.Fields(line)
			n, err := strconv.ParseFloat(fields[len(fields)-1], 64)
			if err != nil {
				t.Fatal(err)
			}
			total += int(n)
		}
	}
	return total
}

// The bound the harness keeps serve to is the one docs/operations.md
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

// attacker is serve's listeners, as one caller reaches them.
type attacker struct{ webhook, health, metrics target }

// from is a reaching every listener from the loopback address source.
func (a attacker) from(source string) attacker {
	a.webhook.source, a.health.source, a.metrics.source = source, source, source
	return a
}

// target is one of serve's listeners, spoken to over raw connections from
// source (a loopback address; none: the system's choice).
type target struct {
	addr    string
	tls     *tls.Config // nil: plain
	source  string
	timeout time.Duration // for answers: none, 60 s
}

// plain is tg without TLS.
func (tg target) plain() target {
	tg.tls = nil
	return tg
}

func (tg target) dialTCP() (net.Conn, error) {
	d := net.Dialer{Timeout: 10 * time.Second}
	if tg.source != "" {
		d.LocalAddr = &net.TCPAddr{IP: net.ParseIP(tg.source)}
	}
	return d.Dial("tcp", tg.addr)
}

// dial connects to tg; conn is nil when the server closed the connection
// in its TLS handshake, as it may close one that waits.
func (tg target) dial() (conn net.Conn, err error) {
	conn, err = tg.dialTCP()
	if err != nil || tg.tls == nil {
		return conn, err
	}
	tc := tls.Client(conn, tg.tls)
	_ = tc.SetDeadline(time.Now().Add(10 * time.Second))
	if tc.Handshake() != nil {
		_ = conn.Close()
		return nil, nil
	}
	return tc, nil
}

// send writes request, a pause between bytes when pace is set, and reads
// whatever comes back; a listener that closes the connection is fine, one
// that does not accept it is not.
func (tg target) send(request string, pace time.Duration) error {
	_, err := tg.exchange(request, pace)
	return err
}

// answer is what came back to a request: status 0 when nothing did.
type answer struct {
	status     int
	body       string
	retryAfter string
	connected  time.Duration // how long the connection (and handshake) took
}

// exchange is send that returns the answer. The request is written while
// the answer is read, since a server may answer (413, 431) before it has
// read all of it.
func (tg target) exchange(request string, pace time.Duration) (answer, error) {
	start := time.Now()
	conn, err := tg.dial()
	connected := time.Since(start)
	if err != nil {
		return answer{}, fmt.Errorf("dial %s: %w", tg.addr, err)
	}
	if conn == nil {
		return answer{connected: connected}, nil
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(cmp.Or(tg.timeout, 60*time.Second)))
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
		return answer{connected: connected}, nil // closed without an answer
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	return answer{status: resp.StatusCode, body: string(body), retryAfter: resp.Header.Get("Retry-After"), connected: connected}, nil
}

// expect sends request and wants status back.
func (tg target) expect(request string, status int) error {
	return tg.expectBody(request, status)
}

// expectBody sends request and wants status back (any, when 0), with a
// body containing one of texts when any are given. An answer of 503 with
// Retry-After (no room in the memory budget now) is tried again after the
// time it asks, as the API server's clients do, and so is a connection
// closed without an answer (cut by the write timeout on a machine whose
// two cores the attackers share, or closed to make room), for up to two
// minutes.
func (tg target) expectBody(request string, status int, texts ...string) error {
	for deadline := time.Now().Add(2 * time.Minute); ; {
		got, err := tg.exchange(request, 0)
		if err != nil {
			return err
		}
		busy := got.status == http.StatusServiceUnavailable && got.retryAfter != "" && status != http.StatusServiceUnavailable
		if (busy || got.status == 0) && time.Now().Before(deadline) {
			seconds, _ := strconv.Atoi(got.retryAfter)
			time.Sleep(time.Duration(max(seconds, 1)) * time.Second)
			continue
		}
		return got.is(status, texts...)
	}
}

// keepAsking sends n requests, one after another, on a keep-alive
// connection (another when the server closes it), and wants each answered
// with one of statuses.
func (tg target) keepAsking(n int, request func(i int) string, statuses ...int) error {
	var r *bufio.Reader
	var conn net.Conn
	defer func() {
		if conn != nil {
			_ = conn.Close()
		}
	}()
	for i := 0; i < n; {
		if conn == nil {
			c, err := tg.dial()
			if err != nil {
				return err
			}
			if c == nil {
				continue
			}
			conn, r = c, bufio.NewReader(c)
			_ = conn.SetDeadline(time.Now().Add(time.Minute))
		}
		resp, err := func() (*http.Response, error) {
			if _, err := io.WriteString(conn, request(i)); err != nil {
				return nil, err
			}
			return http.ReadResponse(r, nil)
		}()
		if err != nil {
			_ = conn.Close()
			conn = nil
			continue
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
		if !slices.Contains(statuses, resp.StatusCode) {
			return fmt.Errorf("request %d: status %d, want one of %v", i, resp.StatusCode, statuses)
		}
		i++
	}
	return nil
}

// refuses sends request, whose headers are past the limit, and wants 431
// back, or the connection closed: the server answers 431 and closes after
// half a second, resetting the connection if request is still arriving,
// and a client slow to read then loses the answer.
func (tg target) refuses(request string) error {
	got, err := tg.exchange(request, 0)
	if err != nil || got.status == 0 {
		return err
	}
	return got.is(http.StatusRequestHeaderFieldsTooLarge)
}

// answers sends request once and wants status back with a body containing
// text, within tg.timeout; connected is how long connecting took.
func (tg target) answers(request string, status int, text string) (connected time.Duration, err error) {
	got, err := tg.exchange(request, 0)
	if err != nil {
		return got.connected, err
	}
	return got.connected, got.is(status, text)
}

// is tells how a differs from status (any, when 0) and a body containing one
// of texts (any, when none).
func (a answer) is(status int, texts ...string) error {
	shown := a.body
	if len(shown) > 600 {
		shown = shown[:300] + "…" + shown[len(shown)-300:]
	}
	if a.status != status && (status != 0 || a.status == 0) {
		return fmt.Errorf("status %d, want %d: %s", a.status, status, shown)
	}
	for _, text := range texts {
		if strings.Contains(a.body, text) {
			return nil
		}
	}
	if len(texts) > 0 {
		return fmt.Errorf("answer has none of %q: %s", texts, shown)
	}
	return nil
}

// each runs conn on n connections to tg at once, for d, redialling any
// the server closes when redial is set; each conn returns when its
// connection is closed or its time is up. A TLS handshake the server cuts
// short counts as a connection it closed: it may close one that waits.
func (tg target) each(n int, d time.Duration, redial bool, conn func(c net.Conn, until time.Time)) error {
	until := time.Now().Add(d)
	errs := make(chan error, n)
	for range n {
		go func() {
			for {
				c, err := tg.dialTCP()
				if err != nil {
					errs <- err
					return
				}
				_ = c.SetDeadline(until)
				if tg.tls != nil {
					if tc := tls.Client(c, tg.tls); tc.Handshake() == nil {
						c = tc
					} else {
						c = nil
					}
				}
				if c != nil {
					conn(c, until)
					_ = c.Close()
				}
				if !redial || time.Now().After(until) {
					errs <- nil
					return
				}
				time.Sleep(redialPause)
			}
		}()
	}
	var all []error
	for range n {
		if err := <-errs; err != nil {
			all = append(all, err)
		}
	}
	if len(all) > 0 {
		return fmt.Errorf("%d of %d connections could not be made, the first: %w", len(all), n, all[0])
	}
	return nil
}

// redialPause is how soon a churning connection the server closed is
// dialled again: each of thousands does so every second, and the harness
// shares the machine's two cores with serve.
const redialPause = time.Second

// waitClosed waits until c is closed by the server or its deadline passes.
func waitClosed(c net.Conn, _ time.Time) { _, _ = io.Copy(io.Discard, c) }

// churn keeps n connections open for d that send nothing, redialling those
// the server closes.
func (tg target) churn(n int, d time.Duration) error {
	return tg.each(n, d, true, waitClosed)
}

// idle opens n connections, each sends one keep-alive GET of path, reads the
// answer and stays idle for d.
func (tg target) idle(n int, path string, d time.Duration) error {
	return tg.each(n, d, false, func(c net.Conn, until time.Time) {
		if _, err := io.WriteString(c, "GET "+path+" HTTP/1.1\r\nHost: lbregistrar\r\n\r\n"); err != nil {
			return
		}
		r := bufio.NewReader(c)
		if resp, err := http.ReadResponse(r, nil); err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			_ = resp.Body.Close()
		}
		_, _ = io.Copy(io.Discard, r)
	})
}

// slowHeaders opens n connections that send request headers a byte every
// half second for d, never finishing them.
func (tg target) slowHeaders(n int, d time.Duration) error {
	return tg.each(n, d, false, func(c net.Conn, until time.Time) {
		if _, err := io.WriteString(c, "GET /healthz HTTP/1.1\r\nHost: lbregistrar\r\nX-Slow: "); err != nil {
			return
		}
		for time.Now().Before(until) {
			if _, err := c.Write([]byte{'a'}); err != nil {
				return
			}
			time.Sleep(500 * time.Millisecond)
		}
	})
}

// unsentBodies keeps n connections for d, each sending a keep-alive
// request that declares a body to path and never sends it, and waiting
// for the server to close it; a closed one is dialled again.
func (tg target) unsentBodies(n int, path string, d time.Duration) error {
	return tg.each(n, d, true, func(c net.Conn, until time.Time) {
		if _, err := io.WriteString(c, keepAlive(post(path, "", "Content-Length: 16"))); err == nil {
			_, _ = io.Copy(io.Discard, c)
		}
	})
}

// keepRequestsOpen opens n connections that each send request and keep the
// connection open for d, reading nothing.
func (tg target) keepRequestsOpen(n int, request string, d time.Duration) error {
	return tg.each(n, d, false, func(c net.Conn, until time.Time) {
		if _, err := io.WriteString(c, request); err == nil {
			time.Sleep(time.Until(until))
		}
	})
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

// keepAlive is request without its Connection: close.
func keepAlive(request string) string {
	return strings.Replace(request, "Connection: close\r\n", "", 1)
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
func repeat(n int, attack func(a attacker, i int) error) func(attacker) error {
	return func(a attacker) error {
		errs := make(chan error, n)
		for i := range n {
			go func() { errs <- attack(a, i) }()
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
