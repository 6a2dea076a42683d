package webhook

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// The budget holds requests in flight to what it can hold, whatever they
// claim: a body larger than allowed is refused unread, one of unknown size
// reserves the largest, one that does not fit waits and is then answered
// 503, and what a request reserved is free again once it is answered.
func TestBudgetBoundsRequestsInFlight(t *testing.T) {
	const maxBody = 1 << 20
	b, err := newBudget(requestCost(maxBody), maxBody)
	if err != nil {
		t.Fatal(err)
	}
	b.wait = 100 * time.Millisecond
	entered, release := make(chan struct{}, 8), make(chan struct{})
	served := 0
	h := b.limit(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		served++
		entered <- struct{}{}
		if r.Header.Get("Hold") != "" {
			<-release
		}
	}))
	send := func(contentLength int64, hold bool) int {
		req := httptest.NewRequest(http.MethodPost, "/", strings.NewReader("{}"))
		req.ContentLength = contentLength
		if hold {
			req.Header.Set("Hold", "1")
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec.Code
	}

	if code := send(maxBody+1, false); code != http.StatusRequestEntityTooLarge || served != 0 {
		t.Errorf("a body past the limit: %d, served %d", code, served)
	}
	if code := send(2, false); code != http.StatusOK {
		t.Errorf("a small request: %d", code)
	}
	held := make(chan int)
	go func() { held <- send(-1, true) }() // unknown size: reserves the largest
	<-entered
	<-entered // the small request's
	if code := send(2, false); code != http.StatusServiceUnavailable {
		t.Errorf("a request past the budget: %d, want 503", code)
	}
	close(release)
	if code := <-held; code != http.StatusOK {
		t.Errorf("the held request: %d", code)
	}
	if code := send(maxBody, false); code != http.StatusOK {
		t.Errorf("after the held request: %d", code)
	}
}

// A budget that cannot hold one request of the largest body is refused
// when the server is made, not found out when such a request waits forever.
func TestBudgetMustHoldTheLargestRequest(t *testing.T) {
	if _, err := newBudget(requestCost(32<<20)-1, 32<<20); err == nil || !strings.Contains(err.Error(), "cannot hold one request") {
		t.Errorf("err = %v", err)
	}
}
