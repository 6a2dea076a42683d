package oci

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"time"

	"github.com/oracle/oci-go-sdk/v65/common"

	"github.com/peppy-ratio/lbregistrar/reconciler/metrics"
)

// Retry classes of an Error (Error.Class).
const (
	ClassConflict     = "conflict"     // 409: the load balancer is busy with another work request
	ClassPrecondition = "precondition" // 412: the ETag changed since the read
	ClassThrottled    = "throttled"    // 429
	ClassServer       = "server"       // 5xx but 501
	ClassNetwork      = "network"      // no response
	ClassWorkRequest  = "workrequest"  // the work request failed
)

// Error is a failed OCI call, classified for retry.
type Error struct {
	Op     string // SDK operation, e.g. UpdateBackendSet
	Status int    // HTTP status, 0 when no response came back
	Code   string // OCI error code, e.g. Conflict, IncorrectState
	// Class is the retry class (one of the Class constants) or "" when
	// retrying cannot help.
	Class string
	// RetryAfter is the server's Retry-After, when it sent one.
	RetryAfter time.Duration
	// RequestID is the call's opc-request-id, which Oracle support asks
	// for: OCI's answer's, or the one sent when no answer came.
	RequestID string
	// LoadBalancerMissing is set on a 404 to a backend set whose load
	// balancer answers 404 too: not the backend set is missing, but the
	// load balancer, or the identity's right to read it.
	LoadBalancerMissing bool
	Err                 error
}

func (e *Error) Error() string {
	msg := fmt.Sprintf("%s: %v", e.Op, e.Err)
	if e.Status != 0 {
		msg = fmt.Sprintf("%s: %d %s: %v", e.Op, e.Status, e.Code, e.Err)
	}
	if e.RequestID != "" {
		msg += " (opc-request-id " + e.RequestID + ")"
	}
	return msg
}

// RequestID is the opc-request-id of the failed call err reports, if any.
func RequestID(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.RequestID
	}
	return ""
}

func (e *Error) Unwrap() error { return e.Err }

// IsNotFound reports whether err says the load balancer or backend set does
// not exist: a 404 to a backend set call. A 404 to GetWorkRequest says only
// that the work request is not known, nothing of the backend set.
func IsNotFound(err error) bool {
	var e *Error
	return errors.As(err, &e) && e.Status == 404 && e.Op != opGetWorkRequest
}

// IsLoadBalancerMissing reports whether err is a 404 to a backend set
// whose load balancer answered 404 too (Error.LoadBalancerMissing).
func IsLoadBalancerMissing(err error) bool {
	var e *Error
	return errors.As(err, &e) && e.LoadBalancerMissing
}

// IsWorkRequestFailed reports whether err says a work request ended without
// applying its change (FAILED or CANCELED), as opposed to its outcome being
// unknown (the wait ended first, the work request could not be read).
func IsWorkRequestFailed(err error) bool {
	var e *Error
	return errors.As(err, &e) && e.Op == opWorkRequest
}

// IsNotAuthorized reports whether OCI answered err's call 401 or 403: it
// does not know the identity (a key not active yet, a wrong fingerprint),
// or no policy lets it make the call.
func IsNotAuthorized(err error) bool {
	var e *Error
	return errors.As(err, &e) && (e.Status == 401 || e.Status == 403)
}

// IsRefused reports whether OCI refused a backend set write for what it
// contains: its work request failed for bad input or a limit (no retry
// class), or the write itself was answered 400 (InvalidParameter,
// LimitExceeded, QuotaExceeded: OCI API errors page). Sending it again
// unchanged cannot help; a write without the additions may.
func IsRefused(err error) bool {
	var e *Error
	return errors.As(err, &e) && (e.Op == opWorkRequest && e.Class == "" || e.Op == "UpdateBackendSet" && e.Status == 400)
}

// Retryable returns the retry class of err and the server's Retry-After, or
// ok=false when retrying the same call cannot succeed.
func Retryable(err error) (class string, after time.Duration, ok bool) {
	var e *Error
	if errors.As(err, &e) && e.Class != "" {
		return e.Class, e.RetryAfter, true
	}
	return "", 0, false
}

// classify turns an SDK error into an *Error and counts the call.
func classify(op string, err error, state *callState) error {
	if err == nil {
		metrics.OCIRequests.WithLabelValues(op, "ok").Inc()
		return nil
	}
	e := &Error{Op: op, Err: err, RequestID: state.getRequestID()}
	if se, ok := common.IsServiceError(err); ok {
		e.Status, e.Code = se.GetHTTPStatusCode(), se.GetCode()
		e.Err = errors.New(se.GetMessage())
		switch {
		case e.Status == 409 && (e.Code == "Conflict" || e.Code == "IncorrectState" || e.Code == "LockConflict"):
			e.Class = ClassConflict
		case e.Status == 412:
			e.Class = ClassPrecondition
		case e.Status == 429:
			e.Class = ClassThrottled
		case e.Status == 501:
			// Not implemented: the same call can never succeed, and the
			// SDK's own retry policy does not retry it either.
		case e.Status >= 500:
			e.Class = ClassServer
		}
		e.RetryAfter = state.getRetryAfter()
		metrics.OCIRequests.WithLabelValues(op, strconv.Itoa(e.Status)).Inc()
		return e
	}
	switch {
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		metrics.OCIRequests.WithLabelValues(op, "canceled").Inc()
	default:
		// No response at all: connection refused or reset, timeout, TLS.
		var ne net.Error
		if common.IsNetworkError(err) || errors.As(err, &ne) || isTransport(err) {
			e.Class = ClassNetwork
		}
		metrics.OCIRequests.WithLabelValues(op, "error").Inc()
	}
	return e
}

// isTransport recognizes errors from the HTTP round trip that net.Error does not cover.
func isTransport(err error) bool {
	var opErr *net.OpError
	return errors.As(err, &opErr) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF)
}
