package ociemu

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"maps"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// apiError is an OCI error response: a status and a service error code.
type apiError struct {
	status     int
	code       string
	message    string
	retryAfter time.Duration
	injected   bool
	authReason string // why authentication failed; logged, never returned
}

func (e *apiError) Error() string { return strconv.Itoa(e.status) + " " + e.code + ": " + e.message }

func notFound(what string) *apiError {
	return &apiError{status: http.StatusNotFound, code: "NotAuthorizedOrNotFound",
		message: "Authorization failed or requested resource not found: " + what}
}

// limitExceeded is OCI's answer to a request past a service limit
// (OCI API errors page: 400 LimitExceeded).
func limitExceeded(message string) *apiError {
	return &apiError{status: http.StatusBadRequest, code: "LimitExceeded", message: message}
}

func invalidParameter(message string) *apiError {
	return &apiError{status: http.StatusBadRequest, code: "InvalidParameter", message: message}
}

// response is a successful answer.
type response struct {
	status        int
	body          any
	etag          string
	workRequestID string
	nextPage      string
}

// requestContext is one API request on its way through the emulator.
type requestContext struct {
	r              *http.Request
	logLocked      bool // has logMu locked (read) until the call is logged
	body           []byte
	operation      string
	loadBalancerID string
	failure        *failure // the write's work request ends FAILED for this
	stuckBy        *faultEntry
	foreignChange  bool // another client changes the load balancer once this request is served
	lose           bool // the answer is lost once the request is served
	lostAs         *apiError
	principal      string // who signed it
}

func (rc *requestContext) header(name string) string { return rc.r.Header.Get(name) }

// decode reads the JSON body into v; unknown fields are ignored as the
// service does for forward compatibility.
func (rc *requestContext) decode(v any) *apiError {
	if err := json.Unmarshal(rc.body, v); err != nil {
		return invalidParameter("The request body is not valid JSON: " + err.Error())
	}
	return nil
}

type opHandler func(rc *requestContext) (*response, error)

// Handler serves both APIs and the /admin/ endpoints. Start serves it; it is
// exported so the emulator can also be mounted in another server.
func (e *Emulator) Handler() http.Handler {
	mux := http.NewServeMux()
	e.registerClassic(mux)
	e.registerNetwork(mux)
	e.registerCompute(mux)
	e.registerAdmin(mux)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, newRequestID(r.Header.Get("opc-request-id")), notFound(r.URL.Path))
	})
	return mux
}

// route registers one API operation: the request is authenticated, faults
// are applied, the handler runs and the call is logged.
func (e *Emulator) route(mux *http.ServeMux, pattern, operation string, isWrite bool, h opHandler) {
	mux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		body, _ := io.ReadAll(io.LimitReader(r.Body, 4<<20))
		rc := &requestContext{r: r, body: body, operation: operation,
			loadBalancerID: r.PathValue("loadBalancerId") + r.PathValue("networkLoadBalancerId")}
		if id := r.PathValue("workRequestId"); id != "" {
			rc.loadBalancerID = e.workRequestBalancer(id)
		}
		defer func() {
			if rc.logLocked {
				e.logMu.RUnlock()
			}
		}()
		requestID := newRequestID(r.Header.Get("opc-request-id"))
		resp, err := e.serve(rc, h, isWrite, start)
		if rc.foreignChange {
			e.changeByOthers(rc.loadBalancerID)
		}
		call := Call{
			Time: start.UTC(), Method: r.Method, Path: r.URL.Path, Operation: operation,
			LoadBalancerID: rc.loadBalancerID, RequestID: requestID, Principal: rc.principal,
			RetryToken: r.Header.Get("opc-retry-token"), IfMatch: r.Header.Get("if-match"),
		}
		var apiErr *apiError
		switch {
		case errors.As(err, &apiErr):
			call.Status, call.Code, call.Fault, call.AuthError = apiErr.status, apiErr.code, apiErr.injected, apiErr.authReason
			writeError(w, requestID, apiErr)
		case err != nil:
			apiErr = &apiError{status: http.StatusInternalServerError, code: "InternalServerError", message: err.Error()}
			call.Status, call.Code = apiErr.status, apiErr.code
			writeError(w, requestID, apiErr)
		case rc.lose:
			call.WorkRequestID, call.Fault = resp.workRequestID, true
			if rc.lostAs != nil {
				call.Status, call.Code = rc.lostAs.status, rc.lostAs.code
			}
			e.record(call)
			if rc.lostAs == nil {
				panic(http.ErrAbortHandler) // the connection is cut, no answer
			}
			writeError(w, requestID, rc.lostAs)
			return
		default:
			call.Status, call.WorkRequestID = resp.status, resp.workRequestID
			writeResponse(w, requestID, resp)
		}
		e.record(call)
	})
}

func (e *Emulator) serve(rc *requestContext, h opHandler, isWrite bool, now time.Time) (*response, error) {
	var err error
	if rc.principal, err = e.authenticate(rc.r, rc.body, now); err != nil {
		return nil, &apiError{status: http.StatusUnauthorized, code: "NotAuthenticated",
			message:    "The required information to complete authentication was not provided or was incorrect.",
			authReason: err.Error()}
	}
	if !e.permitted(rc.principal) {
		return nil, notFound(rc.r.URL.Path)
	}
	eff := e.matchFaults(rc, isWrite)
	if eff.delay > 0 {
		select {
		case <-time.After(eff.delay):
		case <-rc.r.Context().Done():
			return nil, rc.r.Context().Err()
		}
	}
	if eff.err != nil {
		return nil, eff.err
	}
	rc.failure, rc.stuckBy, rc.foreignChange = eff.failure, eff.stuckBy, eff.foreignChange
	rc.lose, rc.lostAs = eff.lose, eff.lostAs
	// From here the call may change what the emulator stores: Calls waits
	// until it is logged, so a test that saw its change also finds its call.
	e.logMu.RLock()
	rc.logLocked = true
	if !isWrite {
		return h(rc)
	}
	return e.idempotent(rc, h)
}

// retryEntry remembers the answer to a write made with a retry token.
type retryEntry struct {
	request  string // method, path and body digest
	response response
}

// idempotent replays the earlier answer to a write retried with the same
// opc-retry-token, and rejects a token reused for a different request.
// Tokens are scoped to the signing key and the service. Tokens are kept for
// the emulator's lifetime (OCI keeps them for at least 24 hours).
func (e *Emulator) idempotent(rc *requestContext, h opHandler) (*response, error) {
	token := rc.header("opc-retry-token")
	if token == "" {
		return h(rc)
	}
	digest := sha256.Sum256(rc.body)
	request := rc.r.Method + " " + rc.r.URL.Path + " " + hex.EncodeToString(digest[:])
	key := rc.r.Header.Get("Authorization")
	if _, after, ok := strings.Cut(key, `keyId="`); ok {
		key, _, _ = strings.Cut(after, `"`)
	}
	service, _, _ := strings.Cut(strings.TrimPrefix(rc.r.URL.Path, "/"), "/")
	key += "\x00" + service + "\x00" + token
	e.mu.Lock()
	prior, seen := e.retryTokens[key]
	e.mu.Unlock()
	if seen {
		if prior.request != request {
			return nil, &apiError{status: http.StatusConflict, code: "InvalidatedRetryToken",
				message: "The retry token was already used for a different request"}
		}
		replay := prior.response
		return &replay, nil
	}
	resp, err := h(rc)
	if err == nil {
		e.mu.Lock()
		e.retryTokens[key] = retryEntry{request: request, response: *resp}
		e.mu.Unlock()
	}
	return resp, err
}

// newRequestID is the emulator's part of an opc-request-id, appended to the
// client's own as OCI does.
func newRequestID(clientID string) string {
	var b [16]byte
	rand.Read(b[:])
	id := strings.ToUpper(hex.EncodeToString(b[:]))
	if clientID != "" {
		return clientID + "/" + id
	}
	return id
}

func writeResponse(w http.ResponseWriter, requestID string, resp *response) {
	h := w.Header()
	h.Set("opc-request-id", requestID)
	if resp.etag != "" {
		h.Set("etag", resp.etag)
	}
	if resp.workRequestID != "" {
		h.Set("opc-work-request-id", resp.workRequestID)
	}
	if resp.nextPage != "" {
		h.Set("opc-next-page", resp.nextPage)
	}
	if resp.body == nil {
		w.WriteHeader(resp.status)
		return
	}
	data, ok := resp.body.(encoded)
	if !ok {
		var err error
		if data, err = marshalWithoutNulls(resp.body); err != nil {
			writeError(w, requestID, &apiError{status: 500, code: "InternalServerError", message: err.Error()})
			return
		}
	}
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(len(data)))
	w.WriteHeader(resp.status)
	_, _ = w.Write(data) // a client gone is its own business
}

func writeError(w http.ResponseWriter, requestID string, e *apiError) {
	h := w.Header()
	h.Set("opc-request-id", requestID)
	h.Set("Content-Type", "application/json")
	if e.retryAfter > 0 {
		h.Set("retry-after", strconv.Itoa(int((e.retryAfter+time.Second-1)/time.Second)))
	}
	w.WriteHeader(e.status)
	_ = json.NewEncoder(w).Encode(map[string]string{"code": e.code, "message": e.message}) // a client gone is its own business
}

// writeJSON answers an admin request, indented for people.
func writeJSON(w http.ResponseWriter, status int, v any) {
	data, err := marshalWithoutNulls(v)
	var buf bytes.Buffer
	if err == nil {
		err = json.Indent(&buf, data, "", "  ")
	}
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	buf.WriteByte('\n')
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes()) // a client gone is its own business
}

// encoded is a response body encoded already.
type encoded []byte

// answer is a read's answer: body, encoded at once, while the caller has
// e.mu locked, so that the state it shows needs no copy (a backend set of 5,000
// backends is read often).
func answer(body any, etag string) (*response, error) {
	data, err := marshalWithoutNulls(body)
	if err != nil {
		return nil, &apiError{status: http.StatusInternalServerError, code: "InternalServerError", message: err.Error()}
	}
	return &response{status: http.StatusOK, body: encoded(data), etag: etag}, nil
}

// marshalWithoutNulls marshals v and drops object members that are null:
// the SDK's structs marshal unset fields as null, while the services leave
// them out.
func marshalWithoutNulls(v any) ([]byte, error) {
	data, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return dropNullMembers(data), nil
}

// dropNullMembers drops the members whose value is null from every object
// of data, compact JSON as json.Marshal writes it, in one pass: responses
// of thousands of backends are answered often, and decoding them into maps
// to do this cost more than everything else the emulator does. Nulls in
// arrays stay.
func dropNullMembers(data []byte) []byte {
	out := make([]byte, 0, len(data))
	var inObject []bool // per open bracket: an object (true) or an array
	keyNext := false    // the next string is a member's name
	for i := 0; i < len(data); i++ {
		c := data[i]
		switch c {
		case '{', '[':
			inObject = append(inObject, c == '{')
			keyNext = c == '{'
		case '}', ']':
			inObject = inObject[:len(inObject)-1]
			keyNext = false
		case ',':
			keyNext = inObject[len(inObject)-1]
		case '"':
			end := stringEnd(data, i)
			if keyNext && hasPrefixAt(data, end+1, ":null") {
				after := end + 1 + len(":null")
				if after < len(data) && data[after] == ',' {
					i = after // the member and its comma; the next member follows
					continue
				}
				// The last member: drop the comma before it, if any.
				out = bytes.TrimSuffix(out, []byte{','})
				i = after - 1
				keyNext = false
				continue
			}
			out = append(out, data[i:end+1]...)
			i = end
			keyNext = false
			continue
		}
		out = append(out, c)
	}
	return out
}

// stringEnd is the index of the quote closing the string opening at start.
func stringEnd(data []byte, start int) int {
	for i := start + 1; i < len(data); i++ {
		switch data[i] {
		case '\\':
			i++
		case '"':
			return i
		}
	}
	return len(data) - 1
}

func hasPrefixAt(data []byte, at int, prefix string) bool {
	return at+len(prefix) <= len(data) && string(data[at:at+len(prefix)]) == prefix
}

// Call is one API request as the emulator saw and answered it.
type Call struct {
	Time           time.Time `json:"time"`
	Method         string    `json:"method"`
	Path           string    `json:"path"`
	Operation      string    `json:"operation"`
	LoadBalancerID string    `json:"loadBalancerId,omitempty"`
	Status         int       `json:"status"`
	Code           string    `json:"code,omitempty"` // service error code of an error answer
	RequestID      string    `json:"requestId"`
	WorkRequestID  string    `json:"workRequestId,omitempty"`
	RetryToken     string    `json:"retryToken,omitempty"`
	IfMatch        string    `json:"ifMatch,omitempty"`
	Fault          bool      `json:"fault,omitempty"`     // answered by an injected fault
	AuthError      string    `json:"authError,omitempty"` // why the signature was rejected
	// Principal signed the request: a user OCID, or the service account a
	// session token was issued to.
	Principal string `json:"principal,omitempty"`
}

// Counters are running totals since the emulator started or ResetCalls.
type Counters struct {
	Requests int `json:"requests"`
	// Writes counts accepted writes (work requests created) per load balancer.
	Writes map[string]int `json:"writes"`
	// Conflicts counts 409s returned because a load balancer was busy.
	Conflicts int `json:"conflicts"`
	// PreconditionFailed counts 412s: writes whose If-Match was stale.
	PreconditionFailed int `json:"preconditionFailed"`
	WorkRequests       int `json:"workRequests"`
	// SessionTokens counts the session tokens issued (workload identity).
	SessionTokens int `json:"sessionTokens"`
}

func newCounters() Counters { return Counters{Writes: map[string]int{}} }

// maxCalls bounds the call log of a long-running emulator.
const maxCalls = 10000

func (e *Emulator) record(c Call) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if len(e.calls) == maxCalls {
		e.calls = append(e.calls[:0], e.calls[maxCalls/10:]...)
	}
	e.calls = append(e.calls, c)
	e.counters.Requests++
	if c.Status == http.StatusPreconditionFailed {
		e.counters.PreconditionFailed++
	}
}

// Calls returns the call log, oldest first; past 10,000 entries the oldest
// are dropped.
func (e *Emulator) Calls() []Call {
	e.logMu.Lock()
	defer e.logMu.Unlock()
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]Call(nil), e.calls...)
}

// Counters returns a snapshot of the counters.
func (e *Emulator) Counters() Counters {
	e.mu.Lock()
	defer e.mu.Unlock()
	c := e.counters
	c.Writes = maps.Clone(c.Writes)
	return c
}

// ResetCalls empties the call log and zeroes the counters.
func (e *Emulator) ResetCalls() {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.calls = nil
	e.counters = newCounters()
}

// changeByOthers applies a change another client made to a load balancer
// outside its backend sets: only the load balancer's etag moves on.
func (e *Emulator) changeByOthers(loadBalancerID string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if b := e.balancers[loadBalancerID]; b != nil {
		b.changed()
	}
}

// workRequestBalancer is the OCID of the load balancer a work request
// changes, so faults and the call log can name it.
func (e *Emulator) workRequestBalancer(id string) string {
	e.mu.Lock()
	defer e.mu.Unlock()
	if w := e.workRequests[id]; w != nil {
		return w.balancer.id()
	}
	return ""
}
