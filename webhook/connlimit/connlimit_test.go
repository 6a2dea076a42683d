package connlimit

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"testing"
	"time"
)

// server serves l with a handler that answers at once, except on /linger,
// which keeps its request in service until release is closed.
// testServer is an HTTP server behind a Listen listener: /linger requests
// say they are being served on lingering, and are answered once release is
// closed; /read reads the request's body; any other path answers at once,
// its body unread.
type testServer struct {
	addr               string
	release, lingering chan struct{}
}

func server(t *testing.T, limits Limits) testServer {
	t.Helper()
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l := Listen(inner, limits)
	ts := testServer{addr: inner.Addr().String(), release: make(chan struct{}), lingering: make(chan struct{}, 16)}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/linger":
			ts.lingering <- struct{}{}
			<-ts.release
		case "/read":
			_, _ = io.Copy(io.Discard, r.Body)
		}
		_, _ = io.WriteString(w, "ok")
	}), ReadHeaderTimeout: time.Minute}
	l.Configure(srv)
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() { _ = srv.Close() })
	return ts
}

// serving waits until n /linger requests are being served: their connections
// no longer wait, however busy the machine.
func (ts testServer) serving(t *testing.T, n int) {
	t.Helper()
	for range n {
		select {
		case <-ts.lingering:
		case <-time.After(10 * time.Second):
			t.Fatal("a /linger request was not served")
		}
	}
}

// dialFrom connects to addr from the loopback address source.
func dialFrom(t *testing.T, source, addr string) net.Conn {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(source)}, Timeout: 5 * time.Second}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// get sends a GET of path on c and waits up to wait for the answer.
func get(c net.Conn, path string, wait time.Duration) error {
	_ = c.SetDeadline(time.Now().Add(wait))
	if _, err := fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: x\r\n\r\n", path); err != nil {
		return err
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		return err
	}
	_ = resp.Body.Close()
	return nil
}

// closed tells whether the server closed c.
func closed(c net.Conn) bool {
	_ = c.SetReadDeadline(time.Now().Add(2 * time.Second))
	_, err := c.Read(make([]byte, 1))
	return errors.Is(err, io.EOF)
}

func TestWaitingConnectionsMakeRoom(t *testing.T) {
	addr := server(t, Limits{Name: "test", Max: 4, PerSource: 4}).addr
	var idle []net.Conn
	for _, source := range []string{"127.0.0.2", "127.0.0.3", "127.0.0.4", "127.0.0.5"} { // one each: the oldest goes
		c := dialFrom(t, source, addr)
		// One in its headers, the others idle after a request.
		if source == "127.0.0.2" {
			_, _ = io.WriteString(c, "GET / HTTP/1.1\r\n")
		} else if err := get(c, "/", 5*time.Second); err != nil {
			t.Fatal(err)
		}
		idle = append(idle, c)
		time.Sleep(10 * time.Millisecond) // keep their order
	}
	if err := get(dialFrom(t, "127.0.0.1", addr), "/", time.Second); err != nil {
		t.Fatalf("a caller found every slot taken by waiting connections: %v", err)
	}
	if !closed(idle[0]) {
		t.Error("the connection waiting longest, sending its headers, was not closed")
	}
	if closed(idle[1]) {
		t.Error("a connection was closed beyond the one that made room")
	}
}

// A full listener closes a waiting connection of the source that has
// the most, not a lone caller's, however long that one has waited.
func TestFloodersLoseTheirOwn(t *testing.T) {
	addr := server(t, Limits{Name: "test", Max: 4, PerSource: 4}).addr
	lone := dialFrom(t, "127.0.0.2", addr)
	time.Sleep(10 * time.Millisecond)
	var flood []net.Conn
	for range 3 {
		flood = append(flood, dialFrom(t, "127.0.0.3", addr))
		time.Sleep(10 * time.Millisecond)
	}
	if err := get(dialFrom(t, "127.0.0.4", addr), "/", time.Second); err != nil {
		t.Fatal(err)
	}
	if closed(lone) {
		t.Error("the lone caller's connection was closed to make room")
	}
	if !closed(flood[0]) {
		t.Error("the flooding source's oldest connection was kept")
	}
}

func TestServingConnectionsAreKept(t *testing.T) {
	ts := server(t, Limits{Name: "test", Max: 2, PerSource: 2})
	addr := ts.addr
	answers := make(chan error, 2)
	for _, source := range []string{"127.0.0.2", "127.0.0.3"} {
		c := dialFrom(t, source, addr)
		go func() { answers <- get(c, "/linger", 10*time.Second) }()
	}
	ts.serving(t, 2)
	answered := make(chan error, 1)
	go func() { answered <- get(dialFrom(t, "127.0.0.1", addr), "/", 10*time.Second) }()
	select {
	case err := <-answered:
		t.Fatalf("answered (%v) while both slots served a request", err)
	case <-time.After(300 * time.Millisecond):
	}
	close(ts.release)
	for range 2 {
		if err := <-answers; err != nil {
			t.Errorf("a request being served was cut: %v", err)
		}
	}
	if err := <-answered; err != nil {
		t.Errorf("the waiting caller was not served once a slot was free: %v", err)
	}
}

func TestOneSourceLosesItsOwnFirst(t *testing.T) {
	ts := server(t, Limits{Name: "test", Max: 8, PerSource: 2})
	addr := ts.addr
	defer close(ts.release)
	other := dialFrom(t, "127.0.0.3", addr)
	if err := get(other, "/", 5*time.Second); err != nil {
		t.Fatal(err)
	}
	first := dialFrom(t, "127.0.0.2", addr)
	time.Sleep(10 * time.Millisecond)
	second := dialFrom(t, "127.0.0.2", addr)
	time.Sleep(10 * time.Millisecond)
	third := dialFrom(t, "127.0.0.2", addr)
	if err := get(third, "/", 5*time.Second); err != nil {
		t.Fatalf("the source's newest connection was not served: %v", err)
	}
	if !closed(first) || closed(second) {
		t.Error("the source's oldest waiting connection did not make room, or more went")
	}
	if closed(other) {
		t.Error("another source's waiting connection made room for this one's")
	}

	// With both of its connections serving, the source's next is refused.
	go func() { _ = get(second, "/linger", 10*time.Second) }()
	go func() { _ = get(third, "/linger", 10*time.Second) }()
	ts.serving(t, 2)
	if refused := dialFrom(t, "127.0.0.2", addr); !closed(refused) {
		t.Error("a source whose connections all serve requests got another")
	}
}

// A request whose body the handler does not read (the test server reads
// none) is answered and its connection closed at once, not kept serving
// while the server waits to discard a body that never comes: its slot is
// free for the next caller long before the read timeout.
func TestAnUnreadBodyHoldsNoSlot(t *testing.T) {
	ts := server(t, Limits{Name: "test", Max: 1, PerSource: 1})
	c := dialFrom(t, "127.0.0.2", ts.addr)
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(c, "POST /nowhere HTTP/1.1\r\nHost: x\r\nContent-Length: 16\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if !resp.Close {
		t.Error("the answer keeps the connection open")
	}
	if !closed(c) {
		t.Error("the connection was not closed")
	}
	start := time.Now()
	if err := get(dialFrom(t, "127.0.0.3", ts.addr), "/", 10*time.Second); err != nil {
		t.Fatal(err)
	}
	if waited := time.Since(start); waited > 5*time.Second {
		t.Errorf("the next caller waited %s for the slot", waited)
	}

	// A body read whole keeps the connection for the next request.
	c = dialFrom(t, "127.0.0.4", ts.addr)
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(c, "POST /read HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\nok"); err != nil {
		t.Fatal(err)
	}
	if resp, err = http.ReadResponse(bufio.NewReader(c), nil); err != nil {
		t.Fatal(err)
	}
	if resp.Close {
		t.Error("a request whose body was read closes its connection")
	}
}
