package reconciler_test

import (
	"net"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/peppy-ratio/lbregistrar/api/v1beta1"
	"github.com/peppy-ratio/lbregistrar/test/ociemu"
)

// BenchmarkTerminatingPodDrain measures how long a pod keeps receiving new
// connections through the (emulated) load balancer after its endpoint
// turns terminating, the figure a preStop delay must cover: clients dial
// through the emulator's listener every 5 ms while the pod's endpoint
// turns terminating, and the time from that change to the last
// connection the pod accepted is reported as new-conns-s, beside the work
// request latency L (1 s) that a drain write waits for. drained-s is when
// the emulator first showed the backend drained.
func BenchmarkTerminatingPodDrain(b *testing.B) {
	const latency = time.Second
	ips := map[string]string{"10.1.89.1": "127.0.0.41", "10.1.89.2": "127.0.0.42"}
	f := newFixture(b, ociemu.Options{WorkRequestLatency: latency, StandIns: ips})
	accepted := map[string]*acceptLog{}
	var port int32
	for ip, standIn := range ips {
		l, err := net.Listen("tcp", net.JoinHostPort(standIn, strconv.Itoa(int(port))))
		f.must(err)
		port = int32(l.Addr().(*net.TCPAddr).Port)
		accepted[ip] = serveAccepts(b, l)
	}
	node := f.ns + "-a"
	f.node(node, "10.0.89.1")
	f.clusterIPService("web")
	serving := func(terminating bool) {
		first := podAt("10.1.89.1", node, !terminating)
		f.podSliceOn("web", port, first, podAt("10.1.89.2", node, true))
	}
	serving(false)
	o := f.options()
	o.NodeDrainPeriod = time.Hour // drained, not removed, while measured
	f.startManager(o)
	f.registrar("pods", classicLB, []v1beta1.Target{podTargetOf(f.ns, "web", "api", 1)})
	p := strconv.Itoa(int(port))
	f.expectBackends(classicLB, "api", "10.1.89.1:"+p+"/1", "10.1.89.2:"+p+"/1")
	addr, err := f.emu.Forward(classicLB, "api")
	f.must(err)

	var newConns, drained time.Duration
	n := 0
	for b.Loop() {
		n++
		stop := dialEvery(addr, 5*time.Millisecond)
		time.Sleep(100 * time.Millisecond) // both pods take connections
		start := time.Now()
		serving(true)
		f.expectBackends(classicLB, "api", "10.1.89.1:"+p+"/1,drain", "10.1.89.2:"+p+"/1")
		drained += time.Since(start)
		time.Sleep(200 * time.Millisecond) // connections after the drain, if any, are seen
		stop()
		newConns += max(accepted["10.1.89.1"].last().Sub(start), 0)
		b.StopTimer()
		serving(false)
		f.expectBackends(classicLB, "api", "10.1.89.1:"+p+"/1", "10.1.89.2:"+p+"/1")
		b.StartTimer()
	}
	b.ReportMetric(newConns.Seconds()/float64(n), "new-conns-s")
	b.ReportMetric(drained.Seconds()/float64(n), "drained-s")
	b.ReportMetric(latency.Seconds(), "L-s")
}

// acceptLog is when a listener last accepted a connection.
type acceptLog struct {
	mu sync.Mutex
	at time.Time
}

func (a *acceptLog) last() time.Time {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.at
}

// serveAccepts accepts and closes connections on l until the benchmark
// ends, noting when it last accepted one.
func serveAccepts(b *testing.B, l net.Listener) *acceptLog {
	a := &acceptLog{}
	go acceptAndClose(l, func() {
		a.mu.Lock()
		a.at = time.Now()
		a.mu.Unlock()
	})
	b.Cleanup(func() { l.Close() })
	return a
}

// dialEvery opens and closes a connection to addr every period until stop
// is called.
func dialEvery(addr string, period time.Duration) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(period)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
					_, _ = c.Read(make([]byte, 1)) // until the backend has closed it
					c.Close()
				}
			}
		}
	}()
	return func() { close(done); wg.Wait() }
}
