package main

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"golang.org/x/net/netutil"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/manager"
)

// listenerAddresses are the addresses serve's listeners got, as
// --addresses-file holds them; a disabled listener has none.
type listenerAddresses struct {
	Webhook string `json:"webhook"`
	Health  string `json:"health,omitempty"`
	Metrics string `json:"metrics,omitempty"`
}

// listen binds the address of flag, or returns nil when it is "0"
// (disabled). Probes and scrapers are few: maxProbeConnections are served at
// once, and more wait to be accepted.
func listen(flag, addr string) (net.Listener, error) {
	if addr == "0" {
		return nil, nil
	}
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("--%s: %w", flag, err)
	}
	return netutil.LimitListener(l, maxProbeConnections), nil
}

const maxProbeConnections = 32

// addressOf is l's address, or none when l is disabled.
func addressOf(l net.Listener) string {
	if l == nil {
		return ""
	}
	return l.Addr().String()
}

// addHealthServer serves /healthz (liveness: ping) and /readyz (readiness:
// ready) on l, as controller-runtime's health probe server does, which binds
// a listener of its own and does not tell which port it got;
// /healthz/<check> and /readyz/<check> answer for one check.
func addHealthServer(mgr manager.Manager, l net.Listener, ready map[string]healthz.Checker) error {
	mux := http.NewServeMux()
	for path, checks := range map[string]map[string]healthz.Checker{"/healthz": {"ping": healthz.Ping}, "/readyz": ready} {
		handler := http.StripPrefix(path, &healthz.Handler{Checks: checks})
		mux.Handle(path, handler)
		mux.Handle(path+"/", handler)
	}
	return mgr.Add(&manager.Server{Name: "health probe", Server: newHTTPServer(mux), Listener: l})
}

// newHTTPServer is a plain server for the probes and metrics, with bounded
// reads and writes: its handlers read no body, and a client that reads its
// answer slowly is cut off.
func newHTTPServer(handler http.Handler) *http.Server {
	return &http.Server{Handler: handler, ReadHeaderTimeout: 10 * time.Second, ReadTimeout: 30 * time.Second, WriteTimeout: 30 * time.Second,
		IdleTimeout: 90 * time.Second, MaxHeaderBytes: 64 << 10}
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
