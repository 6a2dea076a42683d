package tokenauth

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	authnv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apiserver/pkg/authorization/authorizer"

	"github.com/go-logr/logr"
)

// reviewer accepts the token "good" and counts the reviews it was asked.
type reviewer struct{ reviews atomic.Int32 }

func (r *reviewer) Create(_ context.Context, review *authnv1.TokenReview, _ metav1.CreateOptions) (*authnv1.TokenReview, error) {
	r.reviews.Add(1)
	time.Sleep(10 * time.Millisecond) // concurrent callers overlap
	out := review.DeepCopy()
	if review.Spec.Token == "good" {
		out.Status = authnv1.TokenReviewStatus{Authenticated: true, User: authnv1.UserInfo{Username: "system:serviceaccount:monitoring:prometheus"}}
	}
	return out, nil
}

var allowAll = authorizer.AuthorizerFunc(func(context.Context, authorizer.Attributes) (authorizer.Decision, string, error) {
	return authorizer.DecisionAllow, "", nil
})

func serve(t *testing.T, a *Authenticator) func(source, token string) int {
	h, err := a.Filter(allowAll)(logr.Discard(), http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	if err != nil {
		t.Fatal(err)
	}
	return func(source, token string) int {
		req := httptest.NewRequest(http.MethodGet, "/metrics", nil)
		req.RemoteAddr = source + ":40000"
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec.Code
	}
}

// What a caller without a valid token can make the API server do is
// bounded: a token is reviewed once however often (or however many at once)
// it is sent, rejected or not; made-up tokens are reviewed at the rate the
// limits allow, per caller and in all; and the caller learns 401 or 429,
// never 500.
func TestUnknownTokensCostTheAPIServerBoundedReviews(t *testing.T) {
	r := &reviewer{}
	limits := Limits{TTL: time.Minute, Rate: 1e-9, Burst: 6, SourceRate: 1e-9, SourceBurst: 3, MaxEntries: 100}
	get := serve(t, New(r, limits))

	if got := get("10.0.0.1", ""); got != http.StatusUnauthorized {
		t.Errorf("no token: %d, want 401", got)
	}
	var wg sync.WaitGroup
	for range 50 {
		wg.Go(func() {
			if got := get("10.0.0.1", "forged"); got != http.StatusUnauthorized {
				t.Errorf("a rejected token: %d, want 401", got)
			}
		})
	}
	wg.Wait()
	if got := r.reviews.Load(); got != 1 {
		t.Errorf("one rejected token sent 50 times cost %d reviews, want 1", got)
	}

	codes := map[int]int{}
	for i := range 200 {
		codes[get("10.0.0.1", fmt.Sprintf("forged-%d", i))]++
	}
	if codes[http.StatusUnauthorized] != 2 || codes[http.StatusTooManyRequests] != 198 {
		t.Errorf("200 made-up tokens from one caller: answers %v, want 2 401s (its burst of 3 less the first) and 198 429s", codes)
	}
	// Another caller has its own allowance, within the overall one.
	for i := range 5 {
		get("10.0.0.2", fmt.Sprintf("other-%d", i))
	}
	if got := r.reviews.Load(); got != 6 {
		t.Errorf("reviews sent in all: %d, want the overall burst of 6", got)
	}
}

// A scraper's token is reviewed once and then served from memory, so a
// flood of made-up tokens, which exhausts the allowance, does not shut it
// out.
func TestAKnownTokenOutlastsAFlood(t *testing.T) {
	r := &reviewer{}
	get := serve(t, New(r, Limits{TTL: time.Minute, Rate: 1e-9, Burst: 2, SourceRate: 1e-9, SourceBurst: 2, MaxEntries: 100}))
	if got := get("10.0.0.9", "good"); got != http.StatusOK {
		t.Fatalf("the scraper: %d", got)
	}
	for i := range 100 {
		get("10.0.0.1", fmt.Sprintf("forged-%d", i))
	}
	if got := get("10.0.0.9", "good"); got != http.StatusOK {
		t.Errorf("the scraper after a flood: %d", got)
	}
}

// Answers are kept for their TTL only, and no more of them than MaxEntries.
func TestAnswersAreKeptBounded(t *testing.T) {
	r := &reviewer{}
	a := New(r, Limits{TTL: time.Minute, Rate: 1e9, Burst: 1e9, SourceRate: 1e9, SourceBurst: 1e9, MaxEntries: 10})
	now := time.Now()
	a.now = func() time.Time { return now }
	get := serve(t, a)
	for i := range 25 {
		get("10.0.0.1", fmt.Sprintf("forged-%d", i))
	}
	if len(a.answers) > 10 {
		t.Errorf("%d answers kept, want at most 10", len(a.answers))
	}
	get("10.0.0.1", "good")
	before := r.reviews.Load()
	get("10.0.0.1", "good")
	now = now.Add(2 * time.Minute)
	get("10.0.0.1", "good")
	if got := r.reviews.Load() - before; got != 1 {
		t.Errorf("a token sent twice within its TTL and once after: %d more reviews, want 1", got)
	}
}
