// Package tokenauth guards an endpoint with the API server's TokenReview
// and SubjectAccessReview at a bounded cost to the API server, whoever
// calls: every answer (accepted or rejected) is kept for a while by the
// token's hash, concurrent requests with one token share one review, and
// reviews of tokens not yet known are rate limited per caller address and
// in all before any is sent. A caller past the limit is answered 429, one
// whose token the API server rejects 401, so the process's own use of the
// API server (leader election, status writes) keeps its share.
package tokenauth

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"golang.org/x/sync/singleflight"
	"golang.org/x/time/rate"
	authnv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"

	"github.com/peppy-ratio/lbregistrar/webhook/connlimit"
)

// Reviewer asks the API server whom a token belongs to: a client-go
// TokenReviewInterface, on a client whose rate limit is its own.
type Reviewer interface {
	Create(ctx context.Context, review *authnv1.TokenReview, opts metav1.CreateOptions) (*authnv1.TokenReview, error)
}

// Limits of an Authenticator; zero fields take the defaults.
type Limits struct {
	// TTL is how long an answer is kept.
	TTL time.Duration
	// Rate and Burst bound the reviews of unknown tokens sent, in all;
	// SourceRate and SourceBurst those one caller address causes.
	Rate        rate.Limit
	Burst       int
	SourceRate  rate.Limit
	SourceBurst int
	// MaxEntries bounds the answers kept and the addresses tracked.
	MaxEntries int
}

// Defaults are the limits serve uses: a scraper's token is reviewed once a minute, and a flood of
// made-up tokens costs the API server at most 5 reviews a second.
var Defaults = Limits{TTL: time.Minute, Rate: 5, Burst: 10, SourceRate: 1, SourceBurst: 3, MaxEntries: 4096}

const reviewTimeout = 10 * time.Second

// Authenticator reviews bearer tokens.
type Authenticator struct {
	reviewer Reviewer
	limits   Limits
	now      func() time.Time
	flights  singleflight.Group

	mu      sync.Mutex
	answers map[[sha256.Size]byte]answer
	sources map[string]*rate.Limiter
	all     *rate.Limiter
}

type answer struct {
	user    user.Info // nil: rejected
	expires time.Time
}

// Errors Authenticate returns, besides the API server's.
var (
	ErrNoToken   = errors.New("a bearer token is required")
	ErrRejected  = errors.New("the API server rejected the token")
	ErrThrottled = errors.New("too many unknown tokens: try again later")
)

// New is an Authenticator asking reviewer within limits.
func New(reviewer Reviewer, limits Limits) *Authenticator {
	if limits == (Limits{}) {
		limits = Defaults
	}
	return &Authenticator{reviewer: reviewer, limits: limits, now: time.Now,
		answers: map[[sha256.Size]byte]answer{}, sources: map[string]*rate.Limiter{},
		all: rate.NewLimiter(limits.Rate, limits.Burst)}
}

// Authenticate is whom r's bearer token belongs to.
func (a *Authenticator) Authenticate(r *http.Request) (user.Info, error) {
	token, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if token = strings.TrimSpace(token); !ok || token == "" {
		return nil, ErrNoToken
	}
	key := sha256.Sum256([]byte(token))
	if u, known, err := a.known(key); known {
		return u, err
	}
	u, err, _ := a.flights.Do(string(key[:]), func() (any, error) {
		// One review, and one take from the allowance, for every
		// request with this token in flight.
		if !a.allow(r.RemoteAddr) {
			return nil, ErrThrottled
		}
		// Shared by every request with this token: none's end cancels it.
		ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), reviewTimeout)
		defer cancel()
		review, err := a.reviewer.Create(ctx, &authnv1.TokenReview{Spec: authnv1.TokenReviewSpec{Token: token}}, metav1.CreateOptions{})
		if err != nil {
			return nil, fmt.Errorf("reviewing the token: %w", err)
		}
		var u user.Info
		if review.Status.Authenticated {
			su := review.Status.User
			extra := map[string][]string{}
			for k, v := range su.Extra {
				extra[k] = []string(v)
			}
			u = &user.DefaultInfo{Name: su.Username, UID: su.UID, Groups: su.Groups, Extra: extra}
		}
		a.remember(key, u)
		if u == nil {
			return nil, ErrRejected
		}
		return u, nil
	})
	if err != nil {
		return nil, err
	}
	return u.(user.Info), nil
}

// known is the answer kept for key, if any.
func (a *Authenticator) known(key [sha256.Size]byte) (user.Info, bool, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	ans, ok := a.answers[key]
	if !ok || a.now().After(ans.expires) {
		return nil, false, nil
	}
	if ans.user == nil {
		return nil, true, ErrRejected
	}
	return ans.user, true, nil
}

func (a *Authenticator) remember(key [sha256.Size]byte, u user.Info) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(a.answers) >= a.limits.MaxEntries {
		now := a.now()
		for k, ans := range a.answers {
			if now.After(ans.expires) || len(a.answers) >= a.limits.MaxEntries {
				delete(a.answers, k)
			}
		}
	}
	a.answers[key] = answer{user: u, expires: a.now().Add(a.limits.TTL)}
}

// allow takes one review from the caller's and the overall allowance.
func (a *Authenticator) allow(remoteAddr string) bool {
	source := connlimit.Source(remoteAddr)
	a.mu.Lock()
	defer a.mu.Unlock()
	limiter, ok := a.sources[source]
	if !ok {
		if len(a.sources) >= a.limits.MaxEntries {
			clear(a.sources) // the overall allowance still bounds what many addresses cause
		}
		limiter = rate.NewLimiter(a.limits.SourceRate, a.limits.SourceBurst)
		a.sources[source] = limiter
	}
	now := a.now()
	if limiter.TokensAt(now) < 1 || a.all.TokensAt(now) < 1 {
		return false
	}
	return limiter.AllowN(now, 1) && a.all.AllowN(now, 1)
}

// Filter serves next to callers whose token the API server accepts and who
// may use the request's verb on its path (authz, typically a cached
// SubjectAccessReview authorizer); controller-runtime's metrics Filter.
func (a *Authenticator) Filter(authz authorizer.UnconditionalAuthorizer) func(logr.Logger, http.Handler) (http.Handler, error) {
	return func(log logr.Logger, next http.Handler) (http.Handler, error) {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			u, err := a.Authenticate(r)
			switch {
			case errors.Is(err, ErrNoToken), errors.Is(err, ErrRejected):
				http.Error(w, "Unauthorized", http.StatusUnauthorized)
				return
			case errors.Is(err, ErrThrottled):
				w.Header().Set("Retry-After", "1")
				http.Error(w, err.Error(), http.StatusTooManyRequests)
				return
			case err != nil:
				log.Error(err, "Authentication failed")
				w.Header().Set("Retry-After", "1")
				http.Error(w, "Authentication failed: the API server did not answer", http.StatusServiceUnavailable)
				return
			}
			decision, reason, err := authz.Authorize(r.Context(), authorizer.AttributesRecord{User: u, Verb: strings.ToLower(r.Method), Path: r.URL.Path})
			switch {
			case err != nil:
				log.Error(err, "Authorization failed", "user", u.GetName())
				w.Header().Set("Retry-After", "1")
				http.Error(w, "Authorization failed: the API server did not answer", http.StatusServiceUnavailable)
			case decision != authorizer.DecisionAllow:
				log.V(4).Info("Authorization denied", "user", u.GetName(), "reason", reason)
				http.Error(w, fmt.Sprintf("Authorization denied for user %s", u.GetName()), http.StatusForbidden)
			default:
				next.ServeHTTP(w, r)
			}
		}), nil
	}
}
