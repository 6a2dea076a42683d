// Package backendsettest has a fake OCI for the tests of the write path
// and of the controller over it.
package backendsettest

import (
	"context"
	"fmt"
	"net/netip"
	"strings"
	"time"

	"github.com/peppy-ratio/lbregistrar/reconciler/oci"
	"github.com/peppy-ratio/lbregistrar/reconciler/plan"
)

// API is a fake OCI: it answers reads with its backends, fails reads,
// writes and waits as scripted, and records each call in Calls, so a test
// can assert the exact calls the write path made.
type API struct {
	Backends    []plan.Backend
	ReadErrors  []error // consumed one per read
	WriteErrors []error // consumed one per write
	WaitErrors  []error // consumed one per wait
	pending     []plan.Backend
	Reads       int
	Writes      int
	Failed      []string   // what each write named as the failed work request before it
	InFlight    [][]string // others' work requests in flight, consumed one list per listing
	Waited      []string   // the work requests waited for
	// Calls are the calls made, in order: "GetBackendSet NAME",
	// "UpdateBackendSet NAME [IP:PORT/WEIGHT ...]" (a drained backend's
	// weight followed by " drain"), "WorkRequests",
	// "WaitWorkRequest ID".
	Calls []string
}

// next consumes the first of errs.
func next(errs *[]error) error {
	if len(*errs) == 0 {
		return nil
	}
	err := (*errs)[0]
	*errs = (*errs)[1:]
	return err
}

// PrivateIPs lists none: the fake's backend sets take addresses.
func (s *API) PrivateIPs(context.Context, string, []netip.Addr) (oci.PrivateIPs, error) {
	return nil, nil
}

// WorkRequestsSince lists as WorkRequests does: the fake has no listing to
// keep.
func (s *API) WorkRequestsSince(ctx context.Context, lb string, _ time.Time) ([]oci.WorkRequest, error) {
	return s.WorkRequests(ctx, lb)
}

// WorkRequests lists, once each, the next of InFlight's lists of work
// request IDs in flight.
func (s *API) WorkRequests(context.Context, string) ([]oci.WorkRequest, error) {
	s.Calls = append(s.Calls, "WorkRequests")
	if len(s.InFlight) == 0 {
		return nil, nil
	}
	var wrs []oci.WorkRequest
	for _, id := range s.InFlight[0] {
		wrs = append(wrs, oci.WorkRequest{ID: id})
	}
	s.InFlight = s.InFlight[1:]
	return wrs, nil
}

// GetBackendSet reads Backends, or fails with the next of ReadErrors.
func (s *API) GetBackendSet(_ context.Context, lb, name string) (*oci.BackendSet, error) {
	s.Reads++
	s.Calls = append(s.Calls, "GetBackendSet "+name)
	if err := next(&s.ReadErrors); err != nil {
		return nil, err
	}
	return &oci.BackendSet{LoadBalancerID: lb, Name: name, Backends: append([]plan.Backend(nil), s.Backends...)}, nil
}

// UpdateBackendSet accepts backends, which the set has once its work
// request is waited for, or fails with the next of WriteErrors.
func (s *API) UpdateBackendSet(_ context.Context, bs *oci.BackendSet, backends []plan.Backend, failed string) (string, error) {
	s.Writes++
	s.Failed = append(s.Failed, failed)
	s.Calls = append(s.Calls, "UpdateBackendSet "+bs.Name+" "+describe(backends))
	if err := next(&s.WriteErrors); err != nil {
		return "", err
	}
	s.pending = backends
	return fmt.Sprint("wr-", s.Writes), nil
}

// WaitWorkRequest makes the last write's backends Backends, or fails with
// the next of WaitErrors.
func (s *API) WaitWorkRequest(_ context.Context, _, id string) error {
	s.Waited = append(s.Waited, id)
	s.Calls = append(s.Calls, "WaitWorkRequest "+id)
	if err := next(&s.WaitErrors); err != nil {
		return err
	}
	s.Backends = s.pending
	return nil
}

// GetBackendSetHealth says every backend is OK.
func (s *API) GetBackendSetHealth(context.Context, string, string) (*oci.BackendSetHealth, error) {
	return &oci.BackendSetHealth{Status: "OK"}, nil
}

// describe lists backends as UpdateBackendSet's entry in Calls does.
func describe(backends []plan.Backend) string {
	out := make([]string, 0, len(backends))
	for _, b := range backends {
		d := fmt.Sprintf("%s:%d/%d", b.IP, b.Port, b.Weight)
		if b.Drain {
			d += " drain"
		}
		out = append(out, d)
	}
	return "[" + strings.Join(out, ", ") + "]"
}
