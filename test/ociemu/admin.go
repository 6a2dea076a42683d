package ociemu

import (
	"io"
	"net/http"
	"slices"
	"sort"
	"strconv"
	"time"

	"sigs.k8s.io/yaml"
)

// registerAdmin serves /admin/, an unauthenticated JSON view and control
// surface for people and tests (the emulator only listens on loopback):
//
//	GET    /admin/state            current load balancers (Seed shape)
//	POST   /admin/state            seed load balancers from a JSON or YAML body
//	GET    /admin/workrequests     every work request, newest first
//	GET    /admin/calls            call log;  DELETE clears it and the counters
//	GET    /admin/counters         counters
//	GET    /admin/faults           installed faults; POST adds one; DELETE clears all
//	DELETE /admin/faults/{id}      removes one fault
//	POST   /admin/users            registers {"tenancy","user","publicKeyPem"}
//	POST   /admin/forwarders       opens {"loadBalancerId","backendSet"} -> {"address"}
func (e *Emulator) registerAdmin(mux *http.ServeMux) {
	mux.HandleFunc("GET /admin/state", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, e.State())
	})
	mux.HandleFunc("POST /admin/state", func(w http.ResponseWriter, r *http.Request) {
		var s Seed
		if !readAdminBody(w, r, &s) {
			return
		}
		if err := e.SeedState(s); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		writeJSON(w, http.StatusOK, e.State())
	})
	mux.HandleFunc("GET /admin/workrequests", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, e.WorkRequests())
	})
	mux.HandleFunc("GET /admin/calls", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, e.Calls())
	})
	mux.HandleFunc("DELETE /admin/calls", func(w http.ResponseWriter, r *http.Request) {
		e.ResetCalls()
		w.WriteHeader(http.StatusNoContent)
	})
	mux.HandleFunc("GET /admin/counters", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, e.Counters())
	})
	mux.HandleFunc("GET /admin/faults", func(w http.ResponseWriter, r *http.Request) {
		faults := e.Faults()
		out := []faultJSON{}
		for id, f := range faults {
			out = append(out, f.toJSON(id))
		}
		sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
		writeJSON(w, http.StatusOK, out)
	})
	mux.HandleFunc("POST /admin/faults", func(w http.ResponseWriter, r *http.Request) {
		var j faultJSON
		if !readAdminBody(w, r, &j) {
			return
		}
		f, err := j.toFault()
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		writeJSON(w, http.StatusCreated, map[string]int{"id": e.AddFault(f)})
	})
	mux.HandleFunc("DELETE /admin/faults", func(w http.ResponseWriter, r *http.Request) {
		e.ClearFaults()
		w.WriteHeader(http.StatusNoContent)
	})
	mux.HandleFunc("DELETE /admin/faults/{id}", func(w http.ResponseWriter, r *http.Request) {
		id, err := strconv.Atoi(r.PathValue("id"))
		if err != nil {
			http.Error(w, "fault id must be a number", http.StatusBadRequest)
			return
		}
		e.RemoveFault(id)
		w.WriteHeader(http.StatusNoContent)
	})
	mux.HandleFunc("POST /admin/users", func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Tenancy      string `json:"tenancy"`
			User         string `json:"user"`
			PublicKeyPEM string `json:"publicKeyPem"`
		}
		if !readAdminBody(w, r, &req) {
			return
		}
		u, err := e.RegisterPublicKey(req.Tenancy, req.User, []byte(req.PublicKeyPEM))
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		writeJSON(w, http.StatusCreated, u)
	})
	mux.HandleFunc("POST /admin/forwarders", func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			LoadBalancerID string `json:"loadBalancerId"`
			BackendSet     string `json:"backendSet"`
		}
		if !readAdminBody(w, r, &req) {
			return
		}
		addr, err := e.Forward(req.LoadBalancerID, req.BackendSet)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		writeJSON(w, http.StatusCreated, map[string]string{"address": addr})
	})
}

// readAdminBody decodes a JSON or YAML request body strictly.
func readAdminBody(w http.ResponseWriter, r *http.Request, v any) bool {
	data, err := io.ReadAll(io.LimitReader(r.Body, 4<<20))
	if err == nil {
		err = yaml.UnmarshalStrict(data, v)
	}
	if err != nil {
		http.Error(w, "request body: "+err.Error(), http.StatusBadRequest)
		return false
	}
	return true
}

// WorkRequest is a work request of either service, as tests inspect them.
type WorkRequest struct {
	ID             string    `json:"id"`
	LoadBalancerID string    `json:"loadBalancerId"`
	Operation      string    `json:"operation"`
	BackendSet     string    `json:"backendSet,omitempty"`
	Status         string    `json:"status"`
	TimeAccepted   time.Time `json:"timeAccepted"`
	TimeFinished   time.Time `json:"timeFinished,omitzero"`
	// Stuck is set once the work request was due to finish (its latency
	// passed, or FinishWorkRequests ran) but a StuckUpdating fault kept it
	// in flight.
	Stuck bool `json:"stuck,omitempty"`
}

// WorkRequests lists every work request, newest first.
func (e *Emulator) WorkRequests() []WorkRequest {
	e.mu.Lock()
	defer e.mu.Unlock()
	out := []WorkRequest{}
	for _, w := range slices.Backward(e.workOrder) {
		out = append(out, WorkRequest{ID: w.id, LoadBalancerID: w.balancer.id(), Operation: w.operation,
			BackendSet: w.backendSet, Status: w.status, TimeAccepted: w.accepted, TimeFinished: w.finished, Stuck: w.stuck})
	}
	return out
}
