// Package connlimit bounds the connections a server has open so that callers
// who open connections and then do nothing with them cannot keep out the
// callers who use theirs.
//
// A connection is waiting while no request on it is being served: during its
// TLS handshake, while its request headers arrive, and while it idles between
// requests. Keeping a waiting connection open costs the caller nothing, so
// when the listener is full a waiting connection is closed to make room: the
// longest waiting of the source that has the most waiting, so that callers
// who flood the listener from a few addresses lose their own connections and
// not those of a caller with one connection in its handshake; a source at
// its own limit loses its oldest waiting one. Only connections serving a request are never closed to make room:
// when every slot serves one, the next connection waits to be served, which
// the server's read and write timeouts bound.
//
// A request is served until its answer is written, and no longer: an
// HTTP/1 request whose body its handler left unread (an unknown path, a
// refused caller) is answered with Connection: close and reads nothing
// more, rather than kept serving while net/http waits, up to the read
// timeout, to discard a body the caller may never send (it reads what is
// left of a body, up to 256 KiB, before it answers or closes).
package connlimit

import (
	"container/list"
	"context"
	"io"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
)

// Limits of one listener.
type Limits struct {
	// Name labels the listener's metrics.
	Name string
	// Max bounds the connections open at once.
	Max int
	// PerSource bounds the connections open at once from one address. A
	// connection past it closes that source's oldest waiting one or, when
	// all of them serve a request, is refused.
	PerSource int
}

// Listener accepts connections within its Limits. Configure the server that
// serves it with Configure, which tells it when a connection serves a
// request.
type Listener struct {
	net.Listener
	limits Limits

	mu       sync.Mutex
	freed    *sync.Cond // a connection was released or waits again, or the listener closed
	open     int
	bySource map[string]int
	waiting  list.List // of *conn, longest waiting first
	closed   bool
}

// Listen wraps l.
func Listen(l net.Listener, limits Limits) *Listener {
	ll := &Listener{Listener: l, limits: limits, bySource: map[string]int{}}
	ll.freed = sync.NewCond(&ll.mu)
	return ll
}

// conn is an accepted connection; its fields but Conn are guarded by the
// listener's mu.
type conn struct {
	net.Conn
	l        *Listener
	source   string
	serving  int           // requests being served (more than one over HTTP/2)
	waiting  *list.Element // in l.waiting while serving is 0
	released bool
}

// Accept returns the next connection within the limits, closing waiting
// connections to make room for it.
func (l *Listener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if admitted := l.admit(c); admitted != nil {
			return admitted, nil
		}
	}
}

// Source is the caller addr (host:port) names, as the limits count
// callers: by address, whatever the port.
func Source(addr string) string {
	if host, _, err := net.SplitHostPort(addr); err == nil {
		return host
	}
	return addr
}

func (l *Listener) admit(nc net.Conn) *conn {
	source := Source(nc.RemoteAddr().String())
	var evicted []*conn
	defer func() {
		for _, c := range evicted {
			_ = c.Conn.Close()
			shed.WithLabelValues(l.limits.Name, "evicted").Inc()
		}
	}()
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.bySource[source] >= l.limits.PerSource {
		victim := l.oldestWaiting(source)
		if victim == nil {
			_ = nc.Close()
			shed.WithLabelValues(l.limits.Name, "refused").Inc()
			return nil
		}
		l.releaseLocked(victim)
		evicted = append(evicted, victim)
	}
	for l.open >= l.limits.Max && !l.closed {
		if victim := l.oldestWaiting(l.mostWaiting()); victim != nil {
			l.releaseLocked(victim)
			evicted = append(evicted, victim)
			continue
		}
		l.freed.Wait()
	}
	if l.closed {
		_ = nc.Close()
		return nil
	}
	c := &conn{Conn: nc, l: l, source: source}
	l.open++
	l.bySource[source]++
	c.waiting = l.waiting.PushBack(c)
	return c
}

// oldestWaiting is the connection from source that has waited longest, or
// nil.
func (l *Listener) oldestWaiting(source string) *conn {
	for e := l.waiting.Front(); e != nil; e = e.Next() {
		if c := e.Value.(*conn); c.source == source {
			return c
		}
	}
	return nil
}

// mostWaiting is the source with the most waiting connections.
func (l *Listener) mostWaiting() string {
	counts := map[string]int{}
	most := ""
	for e := l.waiting.Front(); e != nil; e = e.Next() {
		source := e.Value.(*conn).source
		if counts[source]++; counts[source] > counts[most] {
			most = source
		}
	}
	return most
}

func (l *Listener) releaseLocked(c *conn) {
	if c.released {
		return
	}
	c.released = true
	l.open--
	if l.bySource[c.source]--; l.bySource[c.source] == 0 {
		delete(l.bySource, c.source)
	}
	if c.waiting != nil {
		l.waiting.Remove(c.waiting)
		c.waiting = nil
	}
	l.freed.Broadcast()
}

// Close stops accepting; connections already served stay open.
func (l *Listener) Close() error {
	l.mu.Lock()
	l.closed = true
	l.freed.Broadcast()
	l.mu.Unlock()
	return l.Listener.Close()
}

func (c *conn) Close() error {
	c.l.mu.Lock()
	c.l.releaseLocked(c)
	c.l.mu.Unlock()
	return c.Conn.Close()
}

// Configure makes srv tell l which connections serve a request: from when
// its handler is called (the headers have all arrived) until the server
// reports the connection idle, its answer written.
func (l *Listener) Configure(srv *http.Server) {
	connContext, connState, handler := srv.ConnContext, srv.ConnState, srv.Handler
	srv.ConnState = func(nc net.Conn, state http.ConnState) {
		if connState != nil {
			connState(nc, state)
		}
		if state != http.StateIdle {
			return
		}
		if c := l.own(nc); c != nil {
			l.idle(c)
		}
	}
	srv.ConnContext = func(ctx context.Context, nc net.Conn) context.Context {
		if connContext != nil {
			ctx = connContext(ctx, nc)
		}
		if c := l.own(nc); c != nil {
			ctx = context.WithValue(ctx, connKey{}, c)
		}
		return ctx
	}
	srv.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if c, ok := r.Context().Value(connKey{}).(*conn); ok {
			l.serve(c, +1)
			defer l.serve(c, -1)
		}
		if r.ProtoMajor != 1 || r.ContentLength == 0 {
			handler.ServeHTTP(w, r)
			return
		}
		body := &watchedBody{ReadCloser: r.Body, left: r.ContentLength}
		r.Body = body
		cw := &closingWriter{ResponseWriter: w, body: body}
		handler.ServeHTTP(cw, r)
		cw.closeIfUnread() // an answer the server writes after the handler
	})
}

// watchedBody tells whether a request's body was read whole: to its EOF,
// or to its declared length (left, -1 when unknown).
type watchedBody struct {
	io.ReadCloser
	mu   sync.Mutex
	left int64
	read bool
}

func (b *watchedBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.left > 0 {
		b.left -= int64(n)
	}
	b.read = b.read || err == io.EOF || b.left == 0
	return n, err
}

func (b *watchedBody) unread() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return !b.read
}

// closingWriter closes the connection after the answer when the request's
// body is unread as the answer's header goes out: it says so in the
// header, and ends the connection's reads at once, so that the server's
// discarding of the rest of the body fails rather than waits.
type closingWriter struct {
	http.ResponseWriter
	body  *watchedBody
	wrote bool
}

func (w *closingWriter) closeIfUnread() {
	if !w.wrote && w.body.unread() {
		w.Header().Set("Connection", "close")
		_ = http.NewResponseController(w.ResponseWriter).SetReadDeadline(time.Now())
	}
	w.wrote = true
}

func (w *closingWriter) WriteHeader(status int) {
	w.closeIfUnread()
	w.ResponseWriter.WriteHeader(status)
}

func (w *closingWriter) Write(p []byte) (int, error) {
	w.closeIfUnread()
	return w.ResponseWriter.Write(p)
}

// Unwrap lets http.ResponseController reach the server's writer.
func (w *closingWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

type connKey struct{}

// own is l's connection under nc's TLS, or nil.
func (l *Listener) own(nc net.Conn) *conn {
	for {
		if c, ok := nc.(*conn); ok && c.l == l {
			return c
		}
		wrapped, ok := nc.(interface{ NetConn() net.Conn })
		if !ok {
			return nil
		}
		nc = wrapped.NetConn()
	}
}

// serve counts a request on c starting (+1) or ending (-1). A handler's
// return is not the end of its answer, which the server writes after it,
// so c waits again only once the server reports it idle (see idle).
func (l *Listener) serve(c *conn, delta int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	c.serving += delta
	if !c.released && c.serving > 0 && c.waiting != nil {
		l.waiting.Remove(c.waiting)
		c.waiting = nil
	}
}

// idle makes c wait again, as the newest, when it serves no request: its
// answers are written, so closing it to make room cuts none.
func (l *Listener) idle(c *conn) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !c.released && c.serving == 0 && c.waiting == nil {
		c.waiting = l.waiting.PushBack(c)
		l.freed.Broadcast() // it may now make room
	}
}

var shed = prometheus.NewCounterVec(prometheus.CounterOpts{
	Name: "lbregistrar_connections_shed_total",
	Help: "Connections closed to keep within a listener's limits: evicted (waiting, to make room) or refused (their source's connections all served requests).",
}, []string{"listener", "reason"})

func init() { crmetrics.Registry.MustRegister(shed) }
