package webhook

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"golang.org/x/sync/semaphore"
)

// What one request may take, by the size n of its body, which it reserves
// from the server's memory budget before its body is read: the body about
// four times over (read, decoded, converted, answered), and what compressed
// annotations in it may expand to at once (one object's, at most 4 MiB of
// JSON and what it decodes into; gzip cannot expand n bytes past about
// 1,032 times n, so a small request reserves little).
const (
	bodyCopies       = 4
	gzipMaxRatio     = 1032
	maxExpansionCost = 16 << 20
)

func requestCost(n int64) int64 {
	return bodyCopies*n + min(gzipMaxRatio*n, maxExpansionCost)
}

// budgetWait is how long a request waits for its share of the budget before
// it is answered 503: shorter than the API server's timeout for a webhook,
// so the API server learns why.
const budgetWait = 10 * time.Second

// budget bounds the memory webhook requests in flight may take together,
// whatever their number and whatever they claim: a request's cost is
// reserved from the size its Content-Length declares (the body is then held
// to it) or, without one, from the largest body allowed.
type budget struct {
	sem     *semaphore.Weighted
	maxBody int64
	wait    time.Duration
}

func newBudget(total, maxBody int64) (*budget, error) {
	if need := requestCost(maxBody); need > total {
		return nil, fmt.Errorf("webhook: a memory budget of %d bytes cannot hold one request of the largest body (%d bytes), which needs %d", total, maxBody, need)
	}
	return &budget{sem: semaphore.NewWeighted(total), maxBody: maxBody, wait: budgetWait}, nil
}

// limit serves next within the budget.
func (b *budget) limit(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := r.ContentLength
		if n > b.maxBody {
			http.Error(w, fmt.Sprintf("request body of %d bytes is larger than the %d allowed", n, b.maxBody), http.StatusRequestEntityTooLarge)
			return
		}
		if n < 0 {
			n = b.maxBody
		}
		cost := requestCost(n)
		ctx, cancel := context.WithTimeout(r.Context(), b.wait)
		err := b.sem.Acquire(ctx, cost)
		cancel()
		if err != nil {
			w.Header().Set("Retry-After", "1")
			http.Error(w, "the webhook server is busy: too many large requests in flight", http.StatusServiceUnavailable)
			return
		}
		defer b.sem.Release(cost)
		next.ServeHTTP(w, r)
	})
}
