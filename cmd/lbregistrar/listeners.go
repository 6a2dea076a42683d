package main

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/peppy-ratio/lbregistrar/webhook/connlimit"
)

// listenerAddresses are the addresses serve's listeners got, as
// --addresses-file lists them; a disabled listener has none.
type listenerAddresses struct {
	Webhook string `json:"webhook"`
	Health  string `json:"health,omitempty"`
	Metrics string `json:"metrics,omitempty"`
}

// listen binds the address of flag for the listener name, or returns nil
// when it is "0" (disabled). Probes and scrapers are few and quick:
// connlimit keeps maxProbeConnections open, closing the longest waiting to
// make room, and at most maxProbeConnectionsPerSource from one address.
func listen(name, flag, addr string) (*connlimit.Listener, error) {
	if addr == "0" {
		return nil, nil
	}
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("--%s: %w", flag, err)
	}
	return connlimit.Listen(l, connlimit.Limits{Name: name, Max: maxProbeConnections, PerSource: maxProbeConnectionsPerSource}), nil
}

const (
	maxProbeConnections          = 32
	maxProbeConnectionsPerSource = 8
)

// addressOf is l's address, or none when l is disabled.
func addressOf(l *connlimit.Listener) string {
	if l == nil {
		return ""
	}
	return l.Addr().String()
}

// addHealthServer serves /healthz (liveness: ping) and /readyz (readiness:
// ready) on l, as controller-runtime's health probe server does, which binds
// a listener of its own and does not tell which port it got;
// /healthz/<check> and /readyz/<check> answer for one check.
func addHealthServer(mgr manager.Manager, l *connlimit.Listener, ready map[string]healthz.Checker) error {
	mux := http.NewServeMux()
	for path, checks := range map[string]map[string]healthz.Checker{"/healthz": {"ping": healthz.Ping}, "/readyz": ready} {
		handler := http.StripPrefix(path, &healthz.Handler{Checks: checks})
		mux.Handle(path, handler)
		mux.Handle(path+"/", handler)
	}
	return mgr.Add(&manager.Server{Name: "health probe", Server: newHTTPServer(l, mux, false), Listener: l})
}

// newHTTPServer is a server for the probes or the metrics on l, whose
// callers send a request at once and read a small answer: headers (and a
// TLS handshake) within 5 s, the probes' timeout, so a starved process does
// not cut a probe it is about to answer; a request whole and its answer
// each within 10 s; at most 8 KiB of headers (a scraper's bearer token is
// about 1 KiB). Keep-alive only where it saves something (a scraper's TLS
// handshake), and then idle for at most 15 s: the kubelet opens a new
// connection for every probe.
func newHTTPServer(l *connlimit.Listener, handler http.Handler, keepAlive bool) *http.Server {
	srv := &http.Server{Handler: handler, ReadHeaderTimeout: 5 * time.Second, ReadTimeout: 10 * time.Second, WriteTimeout: 10 * time.Second,
		IdleTimeout: 15 * time.Second, MaxHeaderBytes: 8 << 10}
	srv.SetKeepAlivesEnabled(keepAlive)
	l.Configure(srv)
	return srv
}

// writeAddresses writes addrs to path as JSON. A file, rather than a log
// line, because the log is for people and its format may change, and a
// harness or an operator's script then needs no log parsing: the file is
// written under another name and renamed into place, so whoever sees it sees
// it whole, with every listener already bound.
func writeAddresses(path string, addrs listenerAddresses) error {
	data, err := json.Marshal(addrs)
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return fmt.Errorf("--addresses-file: %w", err)
	}
	_, err = tmp.Write(append(data, '\n'))
	if closeErr := tmp.Close(); err == nil {
		err = closeErr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		_ = os.Remove(tmp.Name())
		return fmt.Errorf("--addresses-file: %w", err)
	}
	return nil
}
