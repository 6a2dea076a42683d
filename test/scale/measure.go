package scale

import (
	"fmt"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/client-go/rest"
)

// AwaitIdleMachine waits, for up to a minute, until the machine's cores
// are all but idle: the floor is what one operation costs alone, and an API
// server just started or still settling after thousands of writes slows
// whatever shares the cores with it by half (the signature measured 1.5 or
// 2.3 ms, one run to the next, when the floor was taken at once).
func AwaitIdleMachine(tb testing.TB) {
	tb.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		busy, ok := MachineBusy(500 * time.Millisecond)
		if !ok || busy < 0.1 {
			return
		}
		if time.Now().After(deadline) {
			tb.Logf("the floor is measured on a busy machine: %.2f cores busy", busy)
			return
		}
	}
}

// StatusWrites counts the status writes (PATCH or PUT of a status
// subresource) sent through the configurations it wraps, and how many of
// them failed or timed out.
type StatusWrites struct{ sent, failed atomic.Int64 }

// Wrap is a copy of cfg whose requests w counts.
func (w *StatusWrites) Wrap(cfg *rest.Config) *rest.Config {
	cfg = rest.CopyConfig(cfg)
	cfg.Wrap(func(next http.RoundTripper) http.RoundTripper {
		return roundTripper(func(r *http.Request) (*http.Response, error) {
			resp, err := next.RoundTrip(r)
			if (r.Method == http.MethodPatch || r.Method == http.MethodPut) && strings.HasSuffix(r.URL.Path, "/status") {
				w.sent.Add(1)
				if err != nil || resp.StatusCode >= 300 {
					w.failed.Add(1)
				}
			}
			return resp, err
		})
	})
	return cfg
}

// Counts are the writes sent and failed so far.
func (w *StatusWrites) Counts() (sent, failed float64) {
	return float64(w.sent.Load()), float64(w.failed.Load())
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// APIServerWatch samples the resident memory of a kube-apiserver this
// process started, and counts the CPU time it uses.
type APIServerWatch struct {
	pid  int
	cpu0 float64
	mu   sync.Mutex
	peak float64
	done chan struct{}
	wg   sync.WaitGroup
}

// WatchAPIServer starts watching the kube-apiserver cfg reaches.
func WatchAPIServer(t testing.TB, cfg *rest.Config) *APIServerWatch {
	t.Helper()
	pid, err := APIServerPID(cfg)
	if err != nil {
		t.Fatal(err)
	}
	cpu, _ := CPUSeconds(pid)
	w := &APIServerWatch{pid: pid, cpu0: cpu, done: make(chan struct{})}
	w.sample()
	w.wg.Go(func() {
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-w.done:
				return
			case <-tick.C:
				w.sample()
			}
		}
	})
	return w
}

func (w *APIServerWatch) sample() {
	if rss, ok := ResidentMiB(w.pid); ok {
		w.mu.Lock()
		w.peak = max(w.peak, rss)
		w.mu.Unlock()
	}
}

// PeakMiB is the most resident memory sampled so far.
func (w *APIServerWatch) PeakMiB() float64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.peak
}

// Stop ends the watch and returns the CPU seconds used since it began and
// the peak resident memory in MiB.
func (w *APIServerWatch) Stop() (cpuSeconds, peakMiB float64) {
	close(w.done)
	w.wg.Wait()
	w.sample()
	cpu, _ := CPUSeconds(w.pid)
	return cpu - w.cpu0, w.PeakMiB()
}

// APIServerPID finds the kube-apiserver serving cfg's port among the
// processes of this machine.
func APIServerPID(cfg *rest.Config) (int, error) {
	u, err := url.Parse(cfg.Host)
	if err != nil {
		return 0, err
	}
	flag := "--secure-port=" + u.Port()
	dirs, err := os.ReadDir("/proc")
	if err != nil {
		return 0, err
	}
	for _, d := range dirs {
		pid, err := strconv.Atoi(d.Name())
		if err != nil {
			continue
		}
		cmdline, err := os.ReadFile("/proc/" + d.Name() + "/cmdline")
		if err != nil {
			continue
		}
		args := strings.Split(string(cmdline), "\x00")
		if len(args) > 0 && strings.HasSuffix(args[0], "kube-apiserver") && slices.Contains(args, flag) {
			return pid, nil
		}
	}
	return 0, fmt.Errorf("no kube-apiserver process with %s", flag)
}

// Median is the median of the times.
func Median(times map[string]time.Time) time.Time {
	sorted := make([]time.Time, 0, len(times))
	for _, t := range times {
		sorted = append(sorted, t)
	}
	slices.SortFunc(sorted, func(a, b time.Time) int { return a.Compare(b) })
	return sorted[len(sorted)/2]
}

// GuardAPIServer kills the kube-apiserver pid once it uses more than
// killMiB, so that a controller swamping it cannot take the
// machine down too; the benchmark then fails on its connection.
func GuardAPIServer(pid int, killMiB float64) {
	for {
		time.Sleep(200 * time.Millisecond)
		rss, ok := ResidentMiB(pid)
		if !ok {
			return // stopped
		}
		if rss > killMiB {
			fmt.Fprintf(os.Stderr, "the scale API server uses %.0f MiB, more than %.0f MiB: killed\n", rss, killMiB)
			if p, err := os.FindProcess(pid); err == nil {
				_ = p.Kill()
			}
			return
		}
	}
}
