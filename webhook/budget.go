package webhook

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/peppy-ratio/lbregistrar/webhook/connlimit"
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

// firstCharge is what a body of unknown length is first charged for once
// it has sent anything; each further charge doubles what it covers.
const firstCharge = 64 << 10

// budget bounds the memory webhook requests in flight may take together,
// whatever their number and whatever they claim, and shares it so that no
// caller can take it all:
//   - a request with a Content-Length reserves its cost before its body is
//     read (the body is then limited to it); one without is charged as its
//     body arrives, so a trickle occupies little;
//   - one source (address) occupies at most half of the budget;
//   - callers without a verified client certificate occupy together at most
//     the budget less authenticatedReserve, when client certificates are
//     checked at all, so the API server's admission requests find room
//     whatever anonymous callers of /convert do;
//   - a request goes as soon as it fits: small requests do not queue
//     behind a large one (which may so wait its whole budgetWait, and is
//     then answered 503 with Retry-After, like any other).
type budget struct {
	total, maxBody int64
	perSource      int64
	anonymous      int64
	wait           time.Duration

	mu                  sync.Mutex
	used, anonymousUsed int64
	bySource            map[string]int64
	freed               chan struct{} // closed, and replaced, when memory is released
}

// newBudget shares total among requests of bodies up to maxBody, keeping
// reserve for callers with a verified client certificate.
func newBudget(total, maxBody, reserve int64) (*budget, error) {
	b := &budget{total: total, maxBody: maxBody, perSource: total / 2, anonymous: total - reserve, wait: budgetWait,
		bySource: map[string]int64{}, freed: make(chan struct{})}
	if need := requestCost(maxBody); need > min(b.perSource, b.anonymous) {
		return nil, fmt.Errorf("webhook: a memory budget of %d bytes cannot fit one request of the largest body (%d bytes), which needs %d, within what one caller may occupy (half of the budget, and the budget less %d bytes kept for authenticated callers)",
			total, maxBody, need, reserve)
	}
	return b, nil
}

// share is who a request's memory is counted against.
type share struct {
	source    string
	anonymous bool
}

func shareOf(r *http.Request) share {
	return share{source: connlimit.Source(r.RemoteAddr), anonymous: r.TLS == nil || len(r.TLS.VerifiedChains) == 0}
}

var errBusy = errors.New("the webhook server is busy: too many large requests in flight")

// acquire takes cost for s, waiting until it fits or ctx ends.
func (b *budget) acquire(ctx context.Context, s share, cost int64) error {
	for {
		b.mu.Lock()
		if b.used+cost <= b.total && b.bySource[s.source]+cost <= b.perSource && (!s.anonymous || b.anonymousUsed+cost <= b.anonymous) {
			b.used += cost
			b.bySource[s.source] += cost
			if s.anonymous {
				b.anonymousUsed += cost
			}
			b.mu.Unlock()
			return nil
		}
		freed := b.freed
		b.mu.Unlock()
		select {
		case <-freed:
		case <-ctx.Done():
			return errBusy
		}
	}
}

func (b *budget) release(s share, cost int64) {
	if cost == 0 {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.used -= cost
	if b.bySource[s.source] -= cost; b.bySource[s.source] == 0 {
		delete(b.bySource, s.source)
	}
	if s.anonymous {
		b.anonymousUsed -= cost
	}
	close(b.freed)
	b.freed = make(chan struct{})
}

// acquireWithin is acquire waiting at most b.wait.
func (b *budget) acquireWithin(ctx context.Context, s share, cost int64) error {
	ctx, cancel := context.WithTimeout(ctx, b.wait)
	defer cancel()
	return b.acquire(ctx, s, cost)
}

// limit serves next within the budget.
func (b *budget) limit(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := r.ContentLength
		if n > b.maxBody {
			http.Error(w, fmt.Sprintf("request body of %d bytes is larger than the %d allowed", n, b.maxBody), http.StatusRequestEntityTooLarge)
			return
		}
		s := shareOf(r)
		var charged int64
		defer func() { b.release(s, charged) }()
		var err error
		if n >= 0 {
			cost := requestCost(n)
			if err = b.acquireWithin(r.Context(), s, cost); err == nil {
				charged = cost
			}
		} else {
			var body []byte
			body, charged, err = b.readCharged(r, s)
			r.Body, r.ContentLength = io.NopCloser(bytes.NewReader(body)), int64(len(body))
		}
		var tooLarge *http.MaxBytesError
		switch {
		case errors.Is(err, errBusy):
			w.Header().Set("Retry-After", "1")
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
		case errors.As(err, &tooLarge):
			http.Error(w, fmt.Sprintf("request body is larger than the %d bytes allowed", b.maxBody), http.StatusRequestEntityTooLarge)
		case err != nil:
			http.Error(w, "reading the request body: "+err.Error(), http.StatusBadRequest)
		default:
			next.ServeHTTP(w, r)
		}
	})
}

// readCharged reads the body of r, of unknown length, charging s for what
// has arrived before it is kept; it returns the body and what was charged,
// which the caller releases.
func (b *budget) readCharged(r *http.Request, s share) ([]byte, int64, error) {
	var body bytes.Buffer
	var covered, charged int64
	chunk := make([]byte, 32<<10)
	for {
		k, err := r.Body.Read(chunk)
		if need := int64(body.Len() + k); need > covered {
			next := max(need, min(max(2*covered, firstCharge), b.maxBody))
			if err := b.acquireWithin(r.Context(), s, requestCost(next)-requestCost(covered)); err != nil {
				return nil, charged, err
			}
			charged += requestCost(next) - requestCost(covered)
			covered = next
		}
		body.Write(chunk[:k])
		if errors.Is(err, io.EOF) {
			return body.Bytes(), charged, nil
		}
		if err != nil {
			return nil, charged, err
		}
	}
}
