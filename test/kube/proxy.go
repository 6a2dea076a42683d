package kube

import (
	"io"
	"net"
	"slices"
	"sync"
	"sync/atomic"
)

// ServiceProxy stands in for a Kubernetes Service in front of several
// replicas: it accepts TCP connections on 127.0.0.1 and hands each to the
// next backend in turn, passing TLS through, and tries the next backend when
// one refuses the connection. Backends are added as the replicas listen,
// as endpoints are added to a Service; with none, a connection is closed.
type ServiceProxy struct {
	listener net.Listener
	mu       sync.Mutex
	backends []string
	next     atomic.Uint64
	wg       sync.WaitGroup
}

// NewServiceProxy listens on a free 127.0.0.1 port, with no backend yet.
func NewServiceProxy() (*ServiceProxy, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &ServiceProxy{listener: l}
	p.wg.Go(p.serve)
	return p, nil
}

// AddBackend forwards connections to addr too.
func (p *ServiceProxy) AddBackend(addr string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.backends = append(p.backends, addr)
}

// RemoveBackend stops forwarding new connections to addr, as a Service
// does once a replica being replaced leaves its endpoints.
func (p *ServiceProxy) RemoveBackend(addr string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.backends = slices.DeleteFunc(p.backends, func(b string) bool { return b == addr })
}

// Addr is the address the proxy listens on.
func (p *ServiceProxy) Addr() string { return p.listener.Addr().String() }

// Close stops accepting and waits for the connections being forwarded.
func (p *ServiceProxy) Close() error {
	err := p.listener.Close()
	p.wg.Wait()
	return err
}

func (p *ServiceProxy) serve() {
	for {
		conn, err := p.listener.Accept()
		if err != nil {
			return
		}
		p.wg.Go(func() { p.forward(conn) })
	}
}

func (p *ServiceProxy) forward(conn net.Conn) {
	defer conn.Close()
	p.mu.Lock()
	backends := slices.Clone(p.backends)
	p.mu.Unlock()
	start := p.next.Add(1)
	var backend net.Conn
	for i := range uint64(len(backends)) {
		var err error
		if backend, err = net.Dial("tcp", backends[(start+i)%uint64(len(backends))]); err == nil {
			break
		}
	}
	if backend == nil {
		return
	}
	defer backend.Close()
	done := make(chan struct{})
	go func() {
		_, _ = io.Copy(backend, conn)
		_ = backend.(*net.TCPConn).CloseWrite()
		close(done)
	}()
	_, _ = io.Copy(conn, backend)
	_ = conn.(*net.TCPConn).CloseWrite()
	<-done
}
