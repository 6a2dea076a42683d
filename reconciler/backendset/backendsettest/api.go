// Package backendsettest has a fake OCI for the tests of the write path
// and of the controller over it.
package backendsettest

import (
	"context"
	"fmt"

	"github.com/peppy-ratio/lbregistrar/reconciler/oci"
	"github.com/peppy-ratio/lbregistrar/reconciler/plan"
)

// API is a fake OCI: it answers reads with its backends, and fails writes
// and waits as scripted.
type API struct {
	Backends    []plan.Backend
	WriteErrors []error // consumed one per write
	WaitErrors  []error // consumed one per wait
	pending     []plan.Backend
	Reads       int
	Writes      int
	Failed      []string   // what each write named as the failed work request before it
	InFlight    [][]string // others' work requests in flight, consumed one list per listing
	Waited      []string   // the work requests waited for
}

func (s *API) WorkRequests(context.Context, string) ([]oci.WorkRequest, error) {
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

func (s *API) GetBackendSet(_ context.Context, lb, name string) (*oci.BackendSet, error) {
	s.Reads++
	return &oci.BackendSet{LoadBalancerID: lb, Name: name, Backends: append([]plan.Backend(nil), s.Backends...)}, nil
}

func (s *API) UpdateBackendSet(_ context.Context, _ *oci.BackendSet, backends []plan.Backend, failed string) (string, error) {
	s.Writes++
	s.Failed = append(s.Failed, failed)
	if len(s.WriteErrors) > 0 {
		err := s.WriteErrors[0]
		s.WriteErrors = s.WriteErrors[1:]
		if err != nil {
			return "", err
		}
	}
	s.pending = backends
	return fmt.Sprint("wr-", s.Writes), nil
}

func (s *API) WaitWorkRequest(_ context.Context, _, id string) error {
	s.Waited = append(s.Waited, id)
	if len(s.WaitErrors) > 0 {
		err := s.WaitErrors[0]
		s.WaitErrors = s.WaitErrors[1:]
		return err
	}
	s.Backends = s.pending
	return nil
}

func (s *API) GetBackendSetHealth(context.Context, string, string) (*oci.BackendSetHealth, error) {
	return &oci.BackendSetHealth{Status: "OK"}, nil
}
