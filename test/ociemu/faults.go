package ociemu

import (
	"net/http"
	"time"
)

// Fault changes how matching requests are answered. A request matches when
// Operation (an SDK operation name such as "UpdateBackendSet"; empty for
// all), LoadBalancerID and BackendSet (the backend set its path names;
// empty for all) all match.
type Fault struct {
	Operation      string `json:"operation,omitempty"`
	LoadBalancerID string `json:"loadBalancerId,omitempty"`
	BackendSet     string `json:"backendSet,omitempty"`

	// Status, when set, answers with this HTTP status (429, 500, 503, ...)
	// instead of serving the request (with LoseResponse: after serving
	// it). Code defaults to OCI's code for it.
	Status     int           `json:"status,omitempty"`
	Code       string        `json:"code,omitempty"`
	RetryAfter time.Duration `json:"-"` // sent as retry-after with Status, in whole seconds
	Delay      time.Duration `json:"-"` // added before the request is served

	// FailWorkRequest makes a write accepted normally whose work request
	// ends FAILED, leaving the load balancer unchanged. FailCode is why:
	// on a classic load balancer the errorDetails code (INTERNAL_ERROR by
	// default, or BAD_INPUT), on an NLB the code ListWorkRequestErrors
	// gives (InternalServerError by default, or any OCI error code, e.g.
	// InvalidParameter, LimitExceeded). FailMessage is its text.
	FailWorkRequest bool   `json:"failWorkRequest,omitempty"`
	FailCode        string `json:"failCode,omitempty"`
	FailMessage     string `json:"failMessage,omitempty"`
	// StuckUpdating makes a write's work request stay IN_PROGRESS, and an
	// NLB stay UPDATING, until the fault is removed.
	StuckUpdating bool `json:"stuckUpdating,omitempty"`
	// LoseResponse serves a write as usual (its work request is created
	// and runs, and a retry token is remembered) but loses the answer: the
	// client gets Status instead, or, without Status, the connection is
	// cut as a timeout would leave it.
	LoseResponse bool `json:"loseResponse,omitempty"`
	// ForeignChange makes another client change the load balancer (a
	// listener, a certificate) right after the request is answered: the
	// load balancer's etag moves on, its backend sets stay as they are.
	ForeignChange bool `json:"foreignChange,omitempty"`

	// Times limits how many requests the fault affects; 0 means until removed.
	Times int `json:"times,omitempty"`
}

// faultJSON is Fault as the admin endpoint reads and writes it, with
// durations as Go duration strings ("250ms").
type faultJSON struct {
	ID int `json:"id,omitempty"`
	Fault
	RetryAfter string `json:"retryAfter,omitempty"`
	Delay      string `json:"delay,omitempty"`
}

func (f Fault) toJSON(id int) faultJSON {
	j := faultJSON{ID: id, Fault: f}
	if f.RetryAfter != 0 {
		j.RetryAfter = f.RetryAfter.String()
	}
	if f.Delay != 0 {
		j.Delay = f.Delay.String()
	}
	return j
}

func (j faultJSON) toFault() (Fault, error) {
	f := j.Fault
	var err error
	if j.RetryAfter != "" {
		if f.RetryAfter, err = time.ParseDuration(j.RetryAfter); err != nil {
			return Fault{}, err
		}
	}
	if j.Delay != "" {
		if f.Delay, err = time.ParseDuration(j.Delay); err != nil {
			return Fault{}, err
		}
	}
	return f, nil
}

type faultEntry struct {
	id      int
	fault   Fault
	used    int
	removed bool
}

// AddFault installs a fault and returns its id for RemoveFault.
func (e *Emulator) AddFault(f Fault) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.nextFaultID++
	e.faults = append(e.faults, &faultEntry{id: e.nextFaultID, fault: f})
	return e.nextFaultID
}

// RemoveFault removes one fault; work requests it kept stuck then finish.
func (e *Emulator) RemoveFault(id int) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for i, f := range e.faults {
		if f.id == id {
			e.faults = append(e.faults[:i:i], e.faults[i+1:]...)
			f.removed = true
			e.releaseStuckLocked(f)
			return
		}
	}
}

// ClearFaults removes every fault.
func (e *Emulator) ClearFaults() {
	e.mu.Lock()
	defer e.mu.Unlock()
	faults := e.faults
	e.faults = nil
	for _, f := range faults {
		f.removed = true
		e.releaseStuckLocked(f)
	}
}

// Faults lists the installed faults by id.
func (e *Emulator) Faults() map[int]Fault {
	e.mu.Lock()
	defer e.mu.Unlock()
	out := map[int]Fault{}
	for _, f := range e.faults {
		out[f.id] = f.fault
	}
	return out
}

// faultEffect is what the faults matching one request add up to.
type faultEffect struct {
	delay         time.Duration
	err           *apiError
	failure       *failure // the work request ends FAILED for this
	stuckBy       *faultEntry
	foreignChange bool
	// lose, when set, replaces a served write's answer; lostAs is what the
	// client gets instead, nil to cut the connection.
	lose   bool
	lostAs *apiError
}

// matchFaults collects the effects of the faults matching a request and
// consumes one use of each that had an effect.
func (e *Emulator) matchFaults(rc *requestContext, isWrite bool) faultEffect {
	e.mu.Lock()
	defer e.mu.Unlock()
	var eff faultEffect
	kept := e.faults[:0]
	for _, f := range e.faults {
		ff := f.fault
		exhausted := ff.Times > 0 && f.used >= ff.Times
		matches := !exhausted && (ff.Operation == "" || ff.Operation == rc.operation) &&
			(ff.LoadBalancerID == "" || ff.LoadBalancerID == rc.loadBalancerID) &&
			(ff.BackendSet == "" || ff.BackendSet == rc.r.PathValue("backendSetName"))
		effective := false
		if matches {
			if ff.Delay > 0 {
				eff.delay += ff.Delay
				effective = true
			}
			switch {
			case ff.LoseResponse && isWrite && !eff.lose:
				eff.lose, effective = true, true
				if ff.Status != 0 {
					eff.lostAs = faultError(ff)
				}
			case ff.LoseResponse:
			case ff.Status != 0 && eff.err == nil:
				eff.err = faultError(ff)
				effective = true
			}
			if isWrite && eff.err == nil && ff.FailWorkRequest {
				eff.failure = &failure{code: ff.FailCode, message: ff.FailMessage}
				effective = true
			}
			if isWrite && eff.err == nil && ff.StuckUpdating {
				eff.stuckBy = f
				effective = true
			}
			if eff.err == nil && ff.ForeignChange {
				eff.foreignChange = true
				effective = true
			}
		}
		if effective {
			f.used++
		}
		// A used-up stuck fault stays installed: removing it releases
		// the work requests it keeps in flight.
		if ff.Times > 0 && f.used >= ff.Times && !ff.StuckUpdating {
			f.removed = true
			continue
		}
		kept = append(kept, f)
	}
	e.faults = kept
	return eff
}

// faultError is the error a Status fault returns, with OCI's codes.
func faultError(f Fault) *apiError {
	code := f.Code
	message := http.StatusText(f.Status)
	switch f.Status {
	case http.StatusTooManyRequests:
		if code == "" {
			code = "TooManyRequests"
		}
		message = "Too many requests for the user"
	case http.StatusInternalServerError:
		if code == "" {
			code = "InternalServerError"
		}
		message = "Internal error occurred"
	case http.StatusServiceUnavailable:
		if code == "" {
			code = "ServiceUnavailable"
		}
		message = "The service is currently unavailable"
	}
	if code == "" {
		code = http.StatusText(f.Status)
	}
	return &apiError{status: f.Status, code: code, message: message, retryAfter: f.RetryAfter, injected: true}
}
