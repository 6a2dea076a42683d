package ociemu

import (
	"context"
	"fmt"
	"io"
	"net"
	"sync"
)

// forwarder is a TCP listener standing in for a load balancer listener: each
// connection goes to the next registered backend of one backend set that is
// neither drained nor offline (backup backends only when no other is left),
// so an end-to-end test can prove traffic reaches a registered address.
// Backends at addresses other than loopback, and without a loopback stand-in
// (Options.StandIns), are passed over, never dialed.
type forwarder struct {
	e              *Emulator
	listener       net.Listener
	loadBalancerID string
	backendSet     string

	mu    sync.Mutex
	next  int
	conns map[net.Conn]struct{}
	wg    sync.WaitGroup
}

// Forward opens a loopback TCP listener that forwards to the backend set's
// eligible backends as they are at each new connection, and returns its
// address. It is closed with the emulator.
func (e *Emulator) Forward(loadBalancerID, backendSet string) (string, error) {
	if _, err := e.Backends(loadBalancerID, backendSet); err != nil {
		return "", err
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	f := &forwarder{e: e, listener: l, loadBalancerID: loadBalancerID, backendSet: backendSet, conns: map[net.Conn]struct{}{}}
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		l.Close()
		return "", fmt.Errorf("emulator is closed")
	}
	e.forwarders = append(e.forwarders, f)
	e.mu.Unlock()
	f.wg.Add(1)
	go f.serve()
	return l.Addr().String(), nil
}

func (f *forwarder) serve() {
	defer f.wg.Done()
	for {
		c, err := f.listener.Accept()
		if err != nil {
			return
		}
		f.wg.Add(1)
		go func() {
			defer f.wg.Done()
			f.handle(c)
		}()
	}
}

// target is the backend the next connection goes to.
func (f *forwarder) target() (ip string, port int, ok bool) {
	backends, err := f.e.Backends(f.loadBalancerID, f.backendSet)
	if err != nil {
		return "", 0, false
	}
	var primary, backup []Backend
	for _, b := range backends {
		if b.IPAddress = connectAddress(b.IPAddress, f.e.opts.StandIns); b.Drain || b.Offline || b.IPAddress == "" {
			continue
		}
		if b.Backup {
			backup = append(backup, b)
		} else {
			primary = append(primary, b)
		}
	}
	if len(primary) == 0 {
		primary = backup
	}
	if len(primary) == 0 {
		return "", 0, false
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.next++
	b := primary[f.next%len(primary)]
	return b.IPAddress, b.Port, true
}

func (f *forwarder) track(c net.Conn, add bool) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !add {
		delete(f.conns, c)
		return true
	}
	if f.conns == nil {
		return false
	}
	f.conns[c] = struct{}{}
	return true
}

func (f *forwarder) handle(client net.Conn) {
	defer client.Close()
	ip, port, ok := f.target()
	if !ok {
		return
	}
	backend, err := f.e.dialBackend(context.Background(), ip, port)
	if err != nil {
		return
	}
	defer backend.Close()
	if !f.track(client, true) || !f.track(backend, true) {
		return
	}
	defer f.track(client, false)
	defer f.track(backend, false)
	done := make(chan struct{}, 2)
	pipe := func(dst, src net.Conn) {
		_, _ = io.Copy(dst, src) // either side ending ends the copy
		if tc, ok := dst.(*net.TCPConn); ok {
			_ = tc.CloseWrite()
		}
		done <- struct{}{}
	}
	go pipe(backend, client)
	go pipe(client, backend)
	<-done
	<-done
}

func (f *forwarder) close() {
	f.listener.Close()
	f.mu.Lock()
	for c := range f.conns {
		c.Close()
	}
	f.conns = nil
	f.mu.Unlock()
	f.wg.Wait()
}
