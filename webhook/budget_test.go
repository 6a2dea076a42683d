package webhook

import (
	"crypto/tls"
	"crypto/x509"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// testBudget is a budget of total for bodies up to maxBody, keeping
// reserve, whose requests wait 100 ms for room, serving a handler that reads
// the whole body, says it entered, and keeps a request with a Linger header
// in service until release is called.
func testBudget(t *testing.T, total, maxBody, reserve int64) (b *budget, h http.Handler, entered chan struct{}, release func()) {
	t.Helper()
	b, err := newBudget(total, maxBody, reserve)
	if err != nil {
		t.Fatal(err)
	}
	b.wait = 100 * time.Millisecond
	released := make(chan struct{})
	release = sync.OnceFunc(func() { close(released) })
	t.Cleanup(release)
	entered = make(chan struct{}, 16)
	h = b.limit(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		entered <- struct{}{}
		if r.Header.Get("Linger") != "" {
			<-released
		}
	}))
	return b, h, entered, release
}

// request is a POST from source with a body of contentLength (-1: unknown,
// sent as body), lingering when linger, from a verified client when
// authenticated.
func request(source string, contentLength int64, body io.Reader, linger, authenticated bool) *http.Request {
	req := httptest.NewRequest(http.MethodPost, "/", body)
	req.RemoteAddr = source + ":40000"
	req.ContentLength = contentLength
	if linger {
		req.Header.Set("Linger", "1")
	}
	if authenticated {
		req.TLS = &tls.ConnectionState{VerifiedChains: [][]*x509.Certificate{{}}}
	}
	return req
}

func code(h http.Handler, req *http.Request) int {
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec.Code
}

// The budget limits requests in flight to what it has room for, whatever
// they claim: a body larger than allowed is refused unread, one that does
// not fit waits and is then answered 503 with Retry-After, and what a
// request reserved is free again once it is answered.
func TestBudgetBoundsRequestsInFlight(t *testing.T) {
	const maxBody = 1 << 20
	_, h, entered, release := testBudget(t, 2*requestCost(maxBody), maxBody, 0)
	small := func(source string) int { return code(h, request(source, 2, strings.NewReader("{}"), false, false)) }

	if got := code(h, request("10.0.0.1", maxBody+1, strings.NewReader("{}"), false, false)); got != http.StatusRequestEntityTooLarge {
		t.Errorf("a body past the limit: %d", got)
	}
	answers := make(chan int, 2)
	for _, source := range []string{"10.0.0.1", "10.0.0.2"} {
		go func() { answers <- code(h, request(source, maxBody, strings.NewReader("{}"), true, false)) }()
		<-entered
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, request("10.0.0.3", 2, strings.NewReader("{}"), false, false))
	if rec.Code != http.StatusServiceUnavailable || rec.Header().Get("Retry-After") == "" {
		t.Errorf("a request past the budget: %d (Retry-After %q), want 503 with Retry-After", rec.Code, rec.Header().Get("Retry-After"))
	}
	release()
	for range 2 {
		if got := <-answers; got != http.StatusOK {
			t.Errorf("a lingering request: %d", got)
		}
	}
	if got := small("10.0.0.3"); got != http.StatusOK {
		t.Errorf("after the lingering requests: %d", got)
	}
}

// One source occupies at most half of the budget, so another finds room
// whatever the first has in flight.
func TestBudgetSharesAmongSources(t *testing.T) {
	const maxBody = 1 << 20
	_, h, entered, _ := testBudget(t, 2*requestCost(maxBody), maxBody, 0)
	go func() { _ = code(h, request("10.0.0.1", maxBody, strings.NewReader("{}"), true, false)) }()
	<-entered
	if got := code(h, request("10.0.0.1", 2, strings.NewReader("{}"), false, false)); got != http.StatusServiceUnavailable {
		t.Errorf("a source past its half: %d, want 503", got)
	}
	if got := code(h, request("10.0.0.2", maxBody, strings.NewReader("{}"), false, false)); got != http.StatusOK {
		t.Errorf("another source, while the first occupied its half: %d", got)
	}
}

// A body of unknown length is charged for what it has sent, not for the
// largest allowed, so a trickle occupies little: a chunked request that has
// sent a few bytes leaves room for a request of the largest body from
// another source, and its own body is charged as it grows.
func TestBudgetChargesAnUnknownLengthAsItArrives(t *testing.T) {
	const maxBody = 4 << 20
	b, h, entered, release := testBudget(t, 2*requestCost(maxBody), maxBody, 0)
	trickle, feed := io.Pipe()
	done := make(chan int, 1)
	go func() { done <- code(h, request("10.0.0.1", -1, trickle, false, false)) }()
	if _, err := feed.Write([]byte("{")); err != nil {
		t.Fatal(err)
	}
	// Reserving the largest body, the trickle would leave room for one.
	answers := make(chan int, 2)
	for _, source := range []string{"10.0.0.2", "10.0.0.3"} {
		go func() { answers <- code(h, request(source, maxBody/4, strings.NewReader("{}"), true, false)) }()
	}
	for range 2 {
		select {
		case <-entered:
		case got := <-answers:
			t.Fatalf("a request beside a trickling one: %d", got)
		}
	}
	release()
	for range 2 {
		<-answers
	}
	if _, err := feed.Write(make([]byte, 3<<20)); err != nil {
		t.Fatal(err)
	}
	_ = feed.Close()
	if got := <-done; got != http.StatusOK {
		t.Errorf("the trickling request, once whole: %d", got)
	}
	if b.used != 0 {
		t.Errorf("%d bytes still charged after every request was answered", b.used)
	}
}

// With client certificates checked, anonymous callers leave a reserve that
// only authenticated ones (the API server's admission requests) may use.
func TestBudgetKeepsAReserveForAuthenticatedCallers(t *testing.T) {
	const maxBody = 1 << 20
	total := 4 * requestCost(maxBody)
	_, h, entered, _ := testBudget(t, total, maxBody, total/4)
	for _, source := range []string{"10.0.0.1", "10.0.0.2", "10.0.0.3"} {
		go func() { _ = code(h, request(source, maxBody, strings.NewReader("{}"), true, false)) }()
		<-entered
	}
	if got := code(h, request("10.0.0.4", 2, strings.NewReader("{}"), false, false)); got != http.StatusServiceUnavailable {
		t.Errorf("an anonymous request past the anonymous share: %d, want 503", got)
	}
	if got := code(h, request("10.0.0.5", maxBody, strings.NewReader("{}"), false, true)); got != http.StatusOK {
		t.Errorf("an authenticated request while anonymous ones occupied their share: %d", got)
	}
}

// A request goes as soon as it fits: small ones do not queue behind a large
// one that waits for room.
func TestBudgetServesWhatFits(t *testing.T) {
	const maxBody = 1 << 20
	b, h, entered, _ := testBudget(t, 2*requestCost(maxBody), maxBody, 0)
	b.wait = budgetWait // the large request must still wait when the small one comes
	go func() { _ = code(h, request("10.0.0.1", maxBody, strings.NewReader("{}"), true, false)) }()
	go func() { _ = code(h, request("10.0.0.2", maxBody/2, strings.NewReader("{}"), true, false)) }()
	<-entered
	<-entered
	go func() { _ = code(h, request("10.0.0.3", maxBody, strings.NewReader("{}"), false, false)) }() // waits
	time.Sleep(50 * time.Millisecond)
	start := time.Now()
	if got := code(h, request("10.0.0.4", 2, strings.NewReader("{}"), false, false)); got != http.StatusOK || time.Since(start) > time.Second {
		t.Errorf("a small request behind a waiting large one: %d after %s", got, time.Since(start))
	}
}

// A budget that cannot fit one request of the largest body within one
// caller's share is refused when the server is made, not found out when
// such a request waits forever.
func TestBudgetMustHoldTheLargestRequest(t *testing.T) {
	for _, tc := range []struct {
		total, reserve int64
	}{
		{total: 2*requestCost(32<<20) - 1},
		{total: 2 * requestCost(32<<20), reserve: requestCost(32<<20) + 1},
	} {
		if _, err := newBudget(tc.total, 32<<20, tc.reserve); err == nil || !strings.Contains(err.Error(), "cannot fit one request") {
			t.Errorf("budget %d, reserve %d: err = %v", tc.total, tc.reserve, err)
		}
	}
	if _, err := newBudget(DefaultMemoryBudget, DefaultMaxRequestBytes, DefaultMemoryBudget/4); err != nil {
		t.Errorf("the defaults, with client certificates: %v", err)
	}
}
