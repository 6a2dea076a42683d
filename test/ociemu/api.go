package ociemu

import (
	"net/http"
	"strconv"
)

// accept submits a validated write and answers it the way each service
// answers writes: the Network Load Balancer API with 202 Accepted, the Load
// Balancing API with 204 No Content (as public reports of its responses
// show); both carry the work request id in opc-work-request-id.
func (e *Emulator) accept(rc *requestContext, b *balancer, wr write) (*response, error) {
	w, err := e.submit(rc, b, wr)
	if err != nil {
		return nil, err
	}
	status := http.StatusNoContent
	if b.network != nil {
		status = http.StatusAccepted
	}
	return &response{status: status, workRequestID: w.id}, nil
}

// checkIfMatch enforces an If-Match header against the current etag.
func checkIfMatch(rc *requestContext, etag string) *apiError {
	ifMatch := rc.header("if-match")
	if ifMatch == "" || ifMatch == "*" || ifMatch == etag {
		return nil
	}
	return &apiError{status: http.StatusPreconditionFailed, code: "NoEtagMatch",
		message: "The resource has etag " + etag + " but the request's If-Match is " + ifMatch}
}

func alreadyExists(message string) *apiError {
	return &apiError{status: http.StatusConflict, code: "NotAuthorizedOrResourceAlreadyExists", message: message}
}

// defaultPageSize is how many items a list answers when no limit is asked.
// OCI documents no default; a small one catches a client that reads one
// page with few items.
const defaultPageSize = 50

// paginate applies the limit and page query parameters; the page token is
// the offset of the next item.
func paginate[T any](rc *requestContext, items []T) ([]T, string, *apiError) {
	q := rc.r.URL.Query()
	start := 0
	if p := q.Get("page"); p != "" {
		n, err := strconv.Atoi(p)
		if err != nil || n < 0 || n > len(items) {
			return nil, "", invalidParameter("page " + p + " is not valid")
		}
		start = n
	}
	size := defaultPageSize
	if l := q.Get("limit"); l != "" {
		n, err := strconv.Atoi(l)
		if err != nil || n < 1 || n > 1000 {
			return nil, "", invalidParameter("limit must be between 1 and 1000")
		}
		size = n
	}
	end := min(len(items), start+size)
	next := ""
	if end < len(items) {
		next = strconv.Itoa(end)
	}
	return items[start:end], next, nil
}

func orDefault[T any](p *T, v T) *T {
	if p == nil {
		return &v
	}
	return p
}

func itoa(i int) string { return strconv.Itoa(i) }
