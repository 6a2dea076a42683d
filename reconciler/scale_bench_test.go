package reconciler_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/peppy-ratio/lbregistrar/reconciler/metrics"
	"github.com/peppy-ratio/lbregistrar/test/eventually"
	"github.com/peppy-ratio/lbregistrar/test/ociemu"
	"github.com/peppy-ratio/lbregistrar/test/scale"
)

// What BenchmarkScale runs against.
const (
	// scaleLatency is L, how long the emulator's work requests take.
	scaleLatency = 2 * time.Second
	// scaleSets is the number of backend sets of every load balancer.
	scaleSets = 3
	// scaleRate and scaleBurst pace OCI calls in "converge": at 100 load
	// balancers the rate limit, not L, bounds the convergence, so every
	// load balancer's flight waits on the one shared limiter.
	scaleRate, scaleBurst = 50, 10
	// scaleConvergeNodes are the nodes "converge" registers.
	scaleConvergeNodes = 10
	// scaleNodes are the nodes of the cluster of "node-added" and
	// "steady-state", in an API server of their own.
	scaleNodes = 5000
	// scaleResync is the resync period of "steady-state", and
	// scaleResyncs how many resyncs of every resource it watches.
	scaleResync, scaleResyncs = 5 * time.Second, 3
	// scaleAddedLabel marks the nodes "node-added" adds, the only ones its
	// fixtures delete.
	scaleAddedLabel = "lbregistrar.test/added"
	// scaleAdoptBatch is how many resources are created at a time when
	// they adopt 5,000 nodes.
	scaleAdoptBatch = 5
	// scaleAPIServerMiB and scaleNodeAddedLimit are when "node-added"
	// gives up: the scale API server's resident memory, and the time.
	scaleAPIServerMiB   = 5 << 10
	scaleNodeAddedLimit = 3 * time.Minute
	// scaleWatchPeriod is the watch period of "watch-at-rest", and
	// scaleWatchPeriods how many periods it measures.
	scaleWatchPeriod, scaleWatchPeriods = 2 * time.Second, 5
	// scaleAPIServerKillMiB is when the scale API server is killed, whatever runs.
	scaleAPIServerKillMiB = 10 << 10
)

// BenchmarkScale measures the controller at the scale of many load
// balancers, against the real API server and the emulator, with work
// requests taking L = 2 s. Every other load balancer is a network load
// balancer (not preserving the source: nodes go in by address); each has 3
// backend sets and one resource registering a fixed port into each. Work
// requests are polled as serve polls them by default but from 100 ms on
// (PollMin 100 ms, PollMax 10 s: the first poll just before the typical
// duration, later ones every sixteenth of it), and writes back off as by
// default. ns/op is the time measured, as said below.
//
// "converge": K = 1 (baseline), 10 and 100 load balancers whose resources
// exist when the controller starts, 10 nodes; the time until every backend
// set has every node registered (when the last work request finished),
// with OCI calls paced at 50/s (burst 10), so that at K = 100 the shared
// rate limit, not L, bounds it. The floor is max(3 x L, calls / 50/s), calls counting
// every OCI call the emulator answered until then; x-floor is the time over
// it, and x-baseline-floor x-floor over the baseline's in the same run
// (goal: at most 1.3). lb-p50-x-all is when half of the load balancers were
// done, over the whole time: a limiter that served some load balancers
// first would bring it well below 1.
//
// "node-added": 5,000 kubelet-like nodes (test/scale) in an API server of
// their own, in node pools of at most 148 (scale.NodePools); every
// resource registers the nodes of one pool (a node selector), the same
// pool for all of them, as OCI's limits allow: 512 backends in all in a
// classic load balancer, 3 x 148 here. Every backend set already lists
// every node of the pool but one (seeded; the controller, started first,
// adopts them and writes that node as the resources are created a few at
// a time, which is not timed, and so knows how long work requests take),
// then one node joins the pool: the time from its creation until all
// 3 x K backend sets have it registered, K = 1 (baseline) and 100 (goal:
// within 1.3 x the baseline); the writes (goal 1) and OCI calls per backend set; when the
// first write was accepted (first-write-s), and the first write of the load
// balancer written last (last-first-write-s: each waits for its resource's
// intent record, and 100 of them queue at the API server, which bounds
// node-added beyond one load balancer's time); the controller's status writes
// per resource, and those that failed (timed out); the API server's CPU
// time and peak resident memory meanwhile, and this process's CPU time;
// cpu-busy is both CPU times over the machine's cores and the time taken:
// near 1, the machine's CPU, not waiting, bounded the time. This process's
// CPU is told apart by profile label (controller-cpu-s, emulator-cpu-s, and
// unlabeled-cpu-s for the garbage collector and the benchmark's own
// checks); controller-ms/write is the controller's over the writes, beside
// floor-ms/write, what any client of OCI's API spends on one write of a
// backend set of that size (backendSetFloor: its read decoded, its update
// encoded, the read, the update, one poll and the health read after it
// signed); x-write-floor is the one over the other (goal at most 2);
// polls/write are the work request polls.
// OCI calls are paced at 1000/s, so that L and the
// machine bound it, not the rate limit (at serve's default 10/s, 300
// backend sets take at least calls/backend-set x 300 / 10 s). It gives up
// when the API server uses more than 5 GiB, or after 3 minutes: converged
// is 0 then, and the figures are those when it gave up.
//
// "watch-at-rest": 2 (baseline) and 100 load balancers whose resources
// have converged, watched for other writers' changes (package lbwatch)
// every 2 s, for 5 periods with nothing changing: per period, the
// work-request listings, the NLB reads they need (an NLB's work requests
// are listed by compartment), any other call, and the controller's CPU.
//
// "steady-state": as node-added with nothing changing, baseline 2 load
// balancers (one of each kind) and 100, the controller restarted with a
// resync period of 5 s instead of serve's 10 minutes, so that 3 resyncs of
// every resource stand for half an hour. Per
// backend set and resync: writes (goal 0), reads of the backend set
// (GetBackendSet, or any other read of its backends; goal at most 1) and of
// its health (GetBackendSetHealth, read after every sync), classic and
// network load balancers apart, and any other call; per resource and
// resync, status writes (goal 0); the CPU time of this process (the
// controller and the emulator both) per resync of all resources, and the
// API server's CPU time and peak memory, these over the whole time from
// the controller's start (ns/op) until every resource has resynced 3 times
// after its first reconcile. controller-ms/resync is the controller's CPU
// from the end of the first reconcile of every resource on, per backend
// set and resync, beside what the two reads of one cost any client
// (floor-ms/resync: the backend set's and its health's signed, the
// backend set decoded; goal x-resync-floor at most 2).
func BenchmarkScale(b *testing.B) {
	var baselineFloor float64
	converge := func(b *testing.B, lbs int) {
		xFloor := benchConverge(b, lbs)
		if lbs == 1 {
			baselineFloor = xFloor
		} else if baselineFloor > 0 {
			b.ReportMetric(xFloor/baselineFloor, "x-baseline-floor")
		}
	}
	for _, tc := range []struct {
		name string
		lbs  int
		run  func(*testing.B, int)
	}{
		{"converge/baseline", 1, converge},
		{"converge/10-load-balancers", 10, converge},
		{"converge/100-load-balancers", 100, converge},
		{"node-added/baseline", 1, benchNodeAdded},
		{"node-added/100-load-balancers", 100, benchNodeAdded},
		{"watch-at-rest/baseline", 2, benchWatchAtRest},
		{"watch-at-rest/100-load-balancers", 100, benchWatchAtRest},
		{"steady-state/baseline", 2, benchSteadyState},
		{"steady-state/100-load-balancers", 100, benchSteadyState},
	} {
		b.Run(tc.name, func(b *testing.B) { tc.run(b, tc.lbs) })
	}
}

// benchConverge runs "converge" with lbs load balancers and returns its x-floor.
func benchConverge(b *testing.B, lbs int) float64 {
	var took, floor time.Duration
	var calls, halfDone float64
	n := 0
	for b.Loop() {
		b.StopTimer()
		n++
		f := newScaleFixture(b, restConfig, k8s)
		ids := f.seedBalancers("scale", lbs, scaleSets, everyOtherLB, nil)
		var ips []string
		for i := range scaleConvergeNodes {
			ips = append(ips, fmt.Sprintf("10.3.0.%d", i+1))
			f.node(fmt.Sprintf("%s-n%d", f.ns, i), ips[i])
		}
		for i, lb := range ids {
			f.registrar(fmt.Sprintf("scale-%d", i), lb, benchTargets(scaleSets))
		}
		f.emu.ResetCalls()
		start := time.Now()
		b.StartTimer()
		f.startManager(f.scaleOptions(scaleRate, scaleBurst))
		end, done, err := f.awaitWritten(ids, scaleSets, start, nil)
		b.StopTimer()
		f.must(err)
		for _, ip := range ips {
			if !f.registered(ids, scaleSets, ip, true) {
				b.Fatalf("the work requests succeeded, yet not every backend set has %s registered", ip)
			}
		}
		f.awaitQuiet()
		c := 0
		for _, call := range f.callLog() {
			if !call.Time.After(end) {
				c++
			}
		}
		d := end.Sub(start)
		took += d
		calls += float64(c)
		floor += max(scaleSets*scaleLatency, time.Duration(float64(c)/scaleRate*float64(time.Second)))
		halfDone += float64(scale.Median(done).Sub(start)) / float64(d)
		f.discard()
		b.StartTimer() // as b.Loop wants it
	}
	b.ReportMetric(float64(took)/float64(n), "ns/op")
	b.ReportMetric(calls/float64(n), "calls")
	b.ReportMetric(halfDone/float64(n), "lb-p50-x-all")
	xFloor := float64(took) / float64(floor)
	b.ReportMetric(xFloor, "x-floor")
	return xFloor
}

// benchNodeAdded runs "node-added" with lbs load balancers. It gives up
// (converged 0, the time until then) when the scale API server grows past
// scaleAPIServerMiB or the backend sets do not all have the node
// registered within scaleNodeAddedLimit.
func benchNodeAdded(b *testing.B, lbs int) {
	var took time.Duration
	var writes, calls, polls, converged int
	var patches, failedPatches, apiCPU, apiPeak, processCPU float64
	var firstWrite, lastFirstWrite time.Duration
	var byProcess cpuByProcess
	floor := scaleFloor(b)
	n := 0
	for b.Loop() {
		b.StopTimer()
		n++
		f, ids, _ := setUpScale(b, lbs)
		f.emu.ResetCalls()
		api := scale.WatchAPIServer(b, f.cfg)
		patches0, failed0 := f.statusWrites.Counts()
		added := scale.Node(scaleNodes + n)
		added.Labels[scaleAddedLabel] = ""
		added.Labels[scale.PoolLabel] = scale.Pool(0)
		ip := scale.NodeIP(scaleNodes + n)
		cpu0, _ := scale.CPUSeconds(0)
		window := startCPUWindow(b)
		start := time.Now()
		b.StartTimer()
		f.must(f.api.Create(f.ctx, added))
		end, _, err := f.awaitWritten(ids, scaleSets, start, func() error {
			if rss := api.PeakMiB(); rss > scaleAPIServerMiB {
				return fmt.Errorf("the API server uses %.0f MiB, more than the %d MiB this benchmark allows it", rss, scaleAPIServerMiB)
			}
			if time.Since(start) > scaleNodeAddedLimit {
				return fmt.Errorf("not every backend set has the node registered after %s", scaleNodeAddedLimit)
			}
			return nil
		})
		b.StopTimer()
		cpu1, _ := scale.CPUSeconds(0)
		byProcess.add(window.stop(b))
		if err == nil {
			if !f.registered(ids, scaleSets, ip, true) {
				b.Fatalf("the work requests succeeded, yet not every backend set has %s registered", ip)
			}
			f.awaitQuiet() // a second write would come before
			converged++
		} else {
			end = time.Now()
		}
		took += end.Sub(start)
		if first, last, ok := scale.FirstWrites(f.emu, start); ok {
			firstWrite += first.Sub(start)
			lastFirstWrite += last.Sub(start)
		}
		writes += f.writes(ids)
		calls += f.emu.Counters().Requests
		for _, c := range f.callLog() {
			if c.Operation == "GetWorkRequest" {
				polls++
			}
		}
		p, failed := f.statusWrites.Counts()
		patches, failedPatches = patches+p-patches0, failedPatches+failed-failed0
		cpu, peak := api.Stop()
		apiCPU, apiPeak = apiCPU+cpu, max(apiPeak, peak)
		processCPU += cpu1 - cpu0
		if err != nil {
			b.Logf("gave up after %s: %v; by then %d of %d backend sets written, %d OCI calls, %.0f status writes (%.0f failed)",
				end.Sub(start).Round(time.Second), err, f.writes(ids), lbs*scaleSets, f.emu.Counters().Requests, p-patches0, failed-failed0)
		}
		f.dropScale(lbs)
		b.StartTimer() // as b.Loop wants it
	}
	sets, resources := float64(n*lbs*scaleSets), float64(n*lbs)
	b.ReportMetric(float64(took)/float64(n), "ns/op")
	b.ReportMetric(float64(converged)/float64(n), "converged")
	b.ReportMetric(firstWrite.Seconds()/float64(n), "first-write-s")
	b.ReportMetric(lastFirstWrite.Seconds()/float64(n), "last-first-write-s")
	b.ReportMetric(float64(writes)/sets, "writes/backend-set")
	b.ReportMetric(float64(calls)/sets, "calls/backend-set")
	b.ReportMetric(float64(polls)/float64(max(writes, 1)), "polls/write")
	b.ReportMetric(patches/resources, "status-writes/resource")
	b.ReportMetric(failedPatches/resources, "failed-status-writes/resource")
	b.ReportMetric(apiCPU/float64(n), "apiserver-cpu-s")
	b.ReportMetric(processCPU/float64(n), "process-cpu-s")
	// The time the machine's cores needed for the work of this process
	// (controller and emulator) and the API server, over the time taken:
	// near 1, the run waited for nothing but CPU.
	b.ReportMetric((processCPU+apiCPU)/float64(runtime.NumCPU())/took.Seconds(), "cpu-busy")
	b.ReportMetric(apiPeak, "apiserver-MiB")
	byProcess.report(b, n)
	byProcess.againstFloor(b, "write", writes, floor.write())
	byProcess.perSignature(b, calls, floor)
}

// benchSteadyState runs "steady-state" with lbs load balancers.
func benchSteadyState(b *testing.B, lbs int) {
	var took time.Duration
	var patches, apiCPU, apiPeak, processCPU float64
	var byProcess cpuByProcess
	var setResyncs, signatures int
	floor := scaleFloor(b)
	counts := map[string]int{}
	n := 0
	for b.Loop() {
		b.StopTimer()
		n++
		f, ids, stop := setUpScale(b, lbs)
		// Again with the short resync period. The first reconcile of each
		// resource, that of a controller starting, is not a resync.
		stop()
		o := f.scaleOptions(1000, 1000)
		o.Resync = scaleResync
		f.emu.ResetCalls()
		api := scale.WatchAPIServer(b, f.cfg)
		patches0, _ := f.statusWrites.Counts()
		cpu0, _ := scale.CPUSeconds(0)
		start := time.Now()
		b.StartTimer()
		f.startManagerOn(f.cfg, true, o)
		var resyncs map[string][][]ociemu.Call
		reconciled := func(times int) func() error {
			return func() error {
				resyncs = scale.ResyncsOf(f.callLog())
				for _, lb := range ids {
					if got := len(resyncs[lb]); got < times {
						return fmt.Errorf("%s reconciled %d times of %d", lb, got, times)
					}
				}
				return nil
			}
		}
		// The controller's CPU at rest: from when every resource has had
		// its first reconcile, that of a controller starting, to the end.
		eventually.Passes(b, 10*time.Minute, 200*time.Millisecond, reconciled(1))
		window, windowStart := startCPUWindow(b), time.Now()
		eventually.Passes(b, 10*time.Minute, 200*time.Millisecond, reconciled(1+scaleResyncs))
		b.StopTimer()
		windowEnd := time.Now()
		byProcess.add(window.stop(b))
		for _, c := range f.callLog() { // each call signed; one read of each backend set per resync
			if c.Time.After(windowStart) && c.Time.Before(windowEnd) {
				signatures++
				if scale.ReadOf(c.Operation) == "read" {
					setResyncs++
				}
			}
		}
		took += time.Since(start)
		cpu1, _ := scale.CPUSeconds(0)
		processCPU += cpu1 - cpu0
		p, _ := f.statusWrites.Counts()
		patches += p - patches0
		cpu, peak := api.Stop()
		apiCPU, apiPeak = apiCPU+cpu, max(apiPeak, peak)
		for _, lb := range ids {
			for _, calls := range resyncs[lb][1 : 1+scaleResyncs] {
				for _, call := range calls {
					counts[scale.KindOf(lb)+" "+scale.ReadOf(call.Operation)]++
				}
			}
		}
		f.dropScale(lbs)
		b.StartTimer() // as b.Loop wants it
	}
	classic, network := float64(lbs-lbs/2), float64(lbs/2) // every other one is a network load balancer
	per := func(count int, lbs float64) float64 {
		return float64(count) / (float64(n) * lbs * scaleSets * scaleResyncs)
	}
	b.ReportMetric(float64(took)/float64(n), "ns/op")
	b.ReportMetric(per(counts["classic write"]+counts["network write"], classic+network), "writes/set/resync")
	b.ReportMetric(per(counts["classic read"], classic), "classic-reads/set/resync")
	b.ReportMetric(per(counts["classic health"], classic), "classic-health-reads/set/resync")
	b.ReportMetric(per(counts["network read"], network), "nlb-reads/set/resync")
	b.ReportMetric(per(counts["network health"], network), "nlb-health-reads/set/resync")
	b.ReportMetric(per(counts["classic other"]+counts["network other"], classic+network), "other-calls/set/resync")
	// Over the whole window: the controller's start, the resyncs, and the
	// next ones of the quickest resources, so these are a little over.
	b.ReportMetric(patches/(float64(n)*float64(lbs)*scaleResyncs), "status-writes/resource/resync")
	b.ReportMetric(processCPU/(float64(n)*scaleResyncs), "process-cpu-s/resync")
	b.ReportMetric(apiCPU/float64(n), "apiserver-cpu-s")
	b.ReportMetric(apiPeak, "apiserver-MiB")
	byProcess.report(b, n)
	byProcess.againstFloor(b, "resync", setResyncs, floor.resync())
	byProcess.perSignature(b, signatures, floor)
}

// benchWatchAtRest runs "watch-at-rest" with lbs load balancers.
func benchWatchAtRest(b *testing.B, lbs int) {
	var took time.Duration
	var byProcess cpuByProcess
	calls := map[string]int{}
	n := 0
	for b.Loop() {
		b.StopTimer()
		n++
		f := newScaleFixture(b, restConfig, k8s)
		ids := f.seedBalancers("watch", lbs, scaleSets, everyOtherLB, nil)
		f.node(f.ns+"-n0", "10.3.0.1")
		o := f.scaleOptions(1000, 1000)
		o.WatchPeriod, o.Resync = scaleWatchPeriod, time.Hour
		start := time.Now()
		f.startManager(o)
		for i, lb := range ids {
			f.registrar(fmt.Sprintf("watch-%d", i), lb, benchTargets(scaleSets))
		}
		_, _, err := f.awaitWritten(ids, scaleSets, start, nil)
		f.must(err)
		// Two periods for the last health reads and the watch's first
		// listings of every load balancer.
		eventually.Passes(b, time.Minute, 20*time.Millisecond, func() error {
			if counter(b, metrics.Flights) != 0 {
				return errors.New("flights in the air")
			}
			return nil
		})
		time.Sleep(2 * scaleWatchPeriod)
		f.emu.ResetCalls()
		window := startCPUWindow(b)
		b.StartTimer()
		time.Sleep(scaleWatchPeriods * scaleWatchPeriod)
		b.StopTimer()
		byProcess.add(window.stop(b))
		took += scaleWatchPeriods * scaleWatchPeriod
		for _, c := range f.callLog() {
			calls[c.Operation]++
		}
		f.discard()
		b.StartTimer() // as b.Loop wants it
	}
	periods := float64(n * scaleWatchPeriods)
	per := func(count int) float64 { return float64(count) / periods }
	b.ReportMetric(float64(took)/float64(n), "ns/op")
	b.ReportMetric(per(calls["ListWorkRequests"]), "listings/period")
	b.ReportMetric(per(calls["GetNetworkLoadBalancer"]), "nlb-reads/period")
	other := 0
	for op, n := range calls {
		if op != "ListWorkRequests" && op != "GetNetworkLoadBalancer" {
			other += n
		}
	}
	b.ReportMetric(per(other), "other-calls/period")
	if byProcess.controller > 0 {
		b.ReportMetric(byProcess.controller/periods*1e3, "controller-cpu-ms/period")
	}
}

// cpuByProcess adds up the CPU time of the timed windows of a case by
// profile label: the controller's goroutines, the emulator's, and those
// of neither (the garbage collector, which works for both, and the
// benchmark's own checks).
// signing is the controller's part spent in RSA signatures.
type cpuByProcess struct{ controller, signing, emulator, unlabeled float64 }

func (c *cpuByProcess) add(by map[string]scale.Sampled) {
	c.controller += by[controllerProfileName].All
	c.signing += by[controllerProfileName].Inside
	c.emulator += by[ociemu.ProfileName].All
	c.unlabeled += by[""].All
}

// report reports the CPU seconds per run of a case; none when the
// profiler was busy (go test -cpuprofile).
func (c *cpuByProcess) report(b *testing.B, runs int) {
	if c.controller+c.emulator+c.unlabeled == 0 {
		return
	}
	b.ReportMetric(c.controller/float64(runs), "controller-cpu-s")
	b.ReportMetric(c.emulator/float64(runs), "emulator-cpu-s")
	b.ReportMetric(c.unlabeled/float64(runs), "unlabeled-cpu-s")
}

// againstFloor reports the controller's CPU per one of count operations
// (what: write or read), its floor, and the one over the other.
func (c *cpuByProcess) againstFloor(b *testing.B, what string, count int, floor float64) {
	if count == 0 || c.controller == 0 {
		return
	}
	per := c.controller / float64(count)
	b.ReportMetric(per*1e3, "controller-ms/"+what)
	b.ReportMetric(floor*1e3, "floor-ms/"+what)
	b.ReportMetric(per/floor, "x-"+what+"-floor")
}

// perSignature reports what one of the controller's signatures cost, of
// signatures (one an OCI request) in the windows, beside the floor's on an
// idle machine: with the cores busy, each costs more.
func (c *cpuByProcess) perSignature(b *testing.B, signatures int, floor backendSetFloor) {
	if signatures == 0 || c.signing == 0 {
		return
	}
	b.ReportMetric(c.signing/float64(signatures)*1e3, "controller-ms/signature")
	b.ReportMetric(floor.sign*1e3, "floor-ms/signature")
}

// cpuWindow is a scale.CPUWindow that is nil when the profiler is busy.
type cpuWindow struct {
	w    *scale.CPUWindow
	save string
}

// startCPUWindow profiles the CPU of a timed window. With
// LBR_SCALE_PROFILES set to a directory, the window's profile is also
// saved there, named after the case, for go tool pprof (with -tagfocus
// process=controller, the controller's alone).
func startCPUWindow(b *testing.B) *cpuWindow {
	b.Helper()
	w, err := scale.StartCPUWindow(ociemu.ProfileLabel, "crypto/rsa.SignPKCS1v15")
	if err != nil {
		b.Logf("CPU by process not measured: %v", err)
		return &cpuWindow{}
	}
	var save string
	if dir := os.Getenv("LBR_SCALE_PROFILES"); dir != "" {
		save = filepath.Join(dir, strings.ReplaceAll(b.Name(), "/", "_")+".pprof")
	}
	return &cpuWindow{w: w, save: save}
}

func (w *cpuWindow) stop(b *testing.B) map[string]scale.Sampled {
	b.Helper()
	if w.w == nil {
		return nil
	}
	by, err := w.w.Stop(w.save)
	if err != nil {
		b.Fatal(err)
	}
	return by
}

// scaleFloor is the floor per backend set of the scale pool's backends,
// measured once per run.
func scaleFloor(b *testing.B) backendSetFloor {
	b.Helper()
	floorMu.Lock()
	defer floorMu.Unlock()
	if measuredFloor == nil {
		scale.AwaitIdleMachine(b)
		nodes := len(scalePool())
		f := measureFloor(b, nodes)
		b.Logf("floor per backend set of %d backends: decode %.2f ms, encode %.2f ms, sign %.2f ms", nodes, f.decode*1e3, f.encode*1e3, f.sign*1e3)
		measuredFloor = &f
	}
	return *measuredFloor
}

var (
	floorMu       sync.Mutex
	measuredFloor *backendSetFloor
)
