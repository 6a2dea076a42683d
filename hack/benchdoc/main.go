// Command benchdoc runs the project's benchmarks and writes them as a
// Markdown table, each variant beside the baseline of its case.
//
// Benchmarks follow one naming rule: BenchmarkFamily/<case>/baseline and
// BenchmarkFamily/<case>/<variant>. A variant's ratio is its ns/op over the
// baseline's ns/op in the same run, so figures from different machines can
// be compared by their ratios. Extra figures a benchmark reports with
// b.ReportMetric are printed as they are.
package main

import (
	"bufio"
	"bytes"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"
)

// goals are what each family is meant to show, printed beside its table.
var goals = map[string]string{
	"BenchmarkConvert":            "conversion adds little to the JSON decode and encode the webhook does anyway",
	"BenchmarkAdmission":          "within 1.5x of the admit-everything floor, and no growth from 100 to 10,000 existing resources",
	"BenchmarkAPIServerAdmission": "our validating handler adds at most 1 ms to a server-side dry-run create's p99 beside an admit-everything handler behind the same webhook configuration: one-client/alternating's added-p99-ms, from 1,000 creates through each, alternating, so both see the same load (dry-run-create: eight clients, each handler in its own run; handler-p99-ms is the time inside the handler)",
	"BenchmarkConversionReview":   "1,000 objects in one ConversionReview over TLS within 2x of decoding, converting and encoding them in process",
	"BenchmarkCacheMemory":        "the controller's trimmed cache at 5,000 nodes, 10,000 EndpointSlices and 10,000 pods (half with the readiness gate: pods-cached) within 150 MiB of heap (heap-MiB; rss-MiB is the whole test process), whatever 10,000 more pods of a namespace not opted into gates carry (32 labels each of the largest size a label may have)",
	"BenchmarkSDKRoundTrip":       "one signed oci-go-sdk call against the emulator, HTTPS beside HTTP",
	"BenchmarkConvergence":        "S changed backend sets on one classic load balancer (one ETag for all of them) within 1.2 x S x L (x-floor) and no 412; K load balancers changed at once close to one load balancer's time; K NLBs of 3 sets at serve's pacing and polling (L = 1 s) within 1.3 x 3 x L, with no more oci-calls than one read, one write and its polls per set",
	"BenchmarkNodeBurst":          "at most 2 writes per affected backend set for a burst of node events during one work request (L = 1 s; burst-s: how long the burst, patched eight at a time, took)",
	"BenchmarkNoChange":           "0 writes when nothing changed",
	"BenchmarkDesiredState":       "desired state for 5,000 nodes and 50 services, cheap next to one OCI call",
	"BenchmarkRead":               "one read of a backend set of 148 backends, signed and decoded, answered in memory: the adapter's readOne (read-one) against the SDK's generated GetBackendSet (baseline), which builds the request and reads the answer by reflection and formats and redacts a debug line for every field, logging on or off",
	"BenchmarkUpdateBody":         "the body of an UpdateBackendSet of 5,000 backends, the adapter's encoder (set-backends) against the SDK's (baseline), which runs regular expressions for every optional field of every backend",
	"BenchmarkGatedRollout":       "a Deployment of 20 and of 100 replicas (maxSurge 25 %, maxUnavailable 0: 4 batches) rolled out with the real Deployment, ReplicaSet and EndpointSlice controllers, its pods' readiness gate waiting for the load balancer (gated; the pods themselves in an NLB set, or behind their nodes' node port with externalTrafficPolicy: Local), against the same rollout without gates (baseline); L = 1 s, health checks every 1 s, 3 in a row to agree. x-floor: the gated time over the baseline's plus 4 x (L + 3 x 1 s), at most 1.15. gate-p99-over-floor-s: the 99th percentile of a pod's wait from containers ready to gate True, less L + 3 x 1 s, at most 1 s. writes/set/batch: at most 2 (the batch's new pods added together, the leaving ones drained together). drain-max-s: a pod's endpoint terminating to its backend drained, at most L + 1 s (drain-p50-s: the median). reads/pod, health-reads/pod and controller-ms/endpoint-change: what the gates cost, per new pod and per endpoint change the EndpointSlice controller published. changes-spread-max-s: the longest run of endpoint changes (new pods' endpoints appearing, old pods' terminating) with no pause of L/2, as the Deployment and ReplicaSet controllers make them, beside --endpoint-batch-period (800 ms): a run longer than that is more than one write",
	"BenchmarkScale": "L = 2 s, 3 backend sets per load balancer, every other one an NLB. converge: K = 100 load balancers within 1.3 x the baseline's (K = 1) time scaled to their floor max(3 x L, calls / 50 calls/s) (x-baseline-floor at most 1.3; lb-p50-x-all near 1 when the shared rate limit serves them abreast). " +
		"node-added: 5,000 nodes in pools of 148, every resource registering pool 0 (OCI lets a classic load balancer have 512 backends in all); one node joining it, written once into each of 300 backend sets (writes/backend-set 1) within 1.3 x the baseline's time (1 load balancer; converged 0: gave up, the API server past 5 GiB or 3 minutes; cpu-busy near 1: the machine's 2 cores, running the controller, the emulator and the API server, bound the time); the controller's CPU per write (controller-ms/write, told apart from the emulator's by profile label) within 2 x what any OCI client spends on one (x-write-floor: the read decoded, the update encoded, the read, the update, one poll and the health read signed; each in the CPU time of one thread, measured with the machine idle); last-first-write-s: when the first write of the load balancer written last was accepted, each waiting for its resource's intent record, a status write; at 100 resources they queue at the API server. " +
		"watch-at-rest: what watching for other writers costs per period with nothing changing: listings, the NLB reads they need, other calls, the controller's CPU. " +
		"steady-state: 300 backend sets of 148 backends resyncing every 5 s (3 resyncs stand for half an hour at the default 10 minutes): 0 writes and status writes, at most 1 read of each backend set per resync, health reads beside, the controller's CPU per backend set and resync within 2 x what its two reads cost any client (x-resync-floor: both signed, the backend set decoded)",
}

func main() {
	out := flag.String("out", "docs/benchmarks.md", "file to write")
	pattern := flag.String("bench", ".", "benchmarks to run (go test -bench)")
	benchtime := flag.String("benchtime", "1s", "go test -benchtime")
	count := flag.Int("count", 3, "runs of each benchmark; the table shows the median of each figure")
	merge := flag.Bool("merge", false, "keep the sections of -out for families this run did not measure")
	timeout := flag.Duration("timeout", 3*time.Hour, "go test -timeout, for each package's benchmarks together (BenchmarkScale alone takes about 15 minutes a run)")
	flag.Parse()

	args := []string{"test", "-p", "1", "-run", "^$", "-bench", *pattern, "-benchmem", "-benchtime", *benchtime, "-count", strconv.Itoa(*count), "-timeout", timeout.String(), "./..."}
	cmd := exec.Command("go", args...)
	var raw bytes.Buffer
	cmd.Stdout = io.MultiWriter(&raw, os.Stdout)
	cmd.Stderr = os.Stderr
	if err := cmd.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "benchdoc: go test failed:", err)
		os.Exit(1)
	}
	results, cpu := parse(&raw)
	previous, err := os.ReadFile(*out)
	if err != nil && !os.IsNotExist(err) {
		fmt.Fprintln(os.Stderr, "benchdoc:", err)
		os.Exit(1)
	}
	doc := rewrite(string(previous), render(results, cpu, "go "+strings.Join(args, " ")), *merge)
	if err := os.WriteFile(*out, []byte(doc), 0o644); err != nil {
		fmt.Fprintln(os.Stderr, "benchdoc:", err)
		os.Exit(1)
	}
	fmt.Println("wrote", *out)
}

// result is one benchmark line.
type result struct {
	pkg, family, kase, variant string
	metrics                    []metric // in the order go test printed them
}

type metric struct {
	value float64
	unit  string
}

func (r result) get(unit string) (float64, bool) {
	for _, m := range r.metrics {
		if m.unit == unit {
			return m.value, true
		}
	}
	return 0, false
}

// parse reads go test's output; repeated runs of one benchmark become one
// result with the median of each figure.
func parse(r io.Reader) ([]result, string) {
	var runs []result
	var pkg, cpu string
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "pkg: "):
			pkg = strings.TrimPrefix(line, "pkg: ")
		case strings.HasPrefix(line, "cpu: "):
			cpu = strings.TrimPrefix(line, "cpu: ")
		case strings.HasPrefix(line, "Benchmark"):
			if res, ok := parseLine(pkg, line); ok {
				runs = append(runs, res)
			}
		}
	}
	return medians(runs), cpu
}

// medians folds the runs of each benchmark into one result, in the order
// the benchmarks first ran.
func medians(runs []result) []result {
	var order []string
	byName := map[string][]result{}
	for _, r := range runs {
		key := r.pkg + " " + r.family + "/" + r.kase + "/" + r.variant
		if _, seen := byName[key]; !seen {
			order = append(order, key)
		}
		byName[key] = append(byName[key], r)
	}
	out := make([]result, 0, len(order))
	for _, key := range order {
		same := byName[key]
		merged := same[0]
		merged.metrics = nil
		for _, m := range same[0].metrics {
			var values []float64
			for _, r := range same {
				if v, ok := r.get(m.unit); ok {
					values = append(values, v)
				}
			}
			slices.Sort(values)
			merged.metrics = append(merged.metrics, metric{values[len(values)/2], m.unit})
		}
		out = append(out, merged)
	}
	return out
}

// parseLine reads "BenchmarkF/case/variant-N  iterations  value unit  value unit ...".
func parseLine(pkg, line string) (result, bool) {
	fields := strings.Fields(line)
	if len(fields) < 4 || len(fields)%2 != 0 {
		return result{}, false
	}
	name := fields[0]
	if i := strings.LastIndexByte(name, '-'); i > 0 {
		name = name[:i] // the GOMAXPROCS suffix
	}
	parts := strings.SplitN(name, "/", 3)
	res := result{pkg: pkg, family: parts[0]}
	switch len(parts) {
	case 3:
		res.kase, res.variant = parts[1], parts[2]
	case 2:
		res.variant = parts[1]
	}
	for i := 2; i+1 < len(fields); i += 2 {
		v, err := strconv.ParseFloat(fields[i], 64)
		if err != nil {
			return result{}, false
		}
		res.metrics = append(res.metrics, metric{v, fields[i+1]})
	}
	return res, true
}

func render(results []result, cpu, command string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "# Benchmarks\n\nWritten by `make bench` (hack/benchdoc) on %s: %s, %s/%s, %d CPUs, %s.\n\n",
		time.Now().UTC().Format("2006-01-02"), cpu, runtime.GOOS, runtime.GOARCH, runtime.NumCPU(), runtime.Version())
	fmt.Fprintf(&b, "Command: `%s`. Each figure is the median of the runs; a variant's ratio is its median time per operation over the median of the baseline of the same case in the same run.\n", command)

	var families []string
	byFamily := map[string][]result{}
	for _, r := range results {
		if _, seen := byFamily[r.family]; !seen {
			families = append(families, r.family)
		}
		byFamily[r.family] = append(byFamily[r.family], r)
	}
	for _, family := range families {
		rows := byFamily[family]
		fmt.Fprintf(&b, "\n## %s\n\n`%s`", family, rows[0].pkg)
		if goal, ok := goals[family]; ok {
			fmt.Fprintf(&b, ". Goal: %s", goal)
		}
		b.WriteString(".\n\n| case | variant | ns/op | ratio to baseline | allocs/op | B/op | other |\n|---|---|---:|---:|---:|---:|---|\n")
		baselines := map[string]float64{}
		for _, r := range rows {
			if r.variant == "baseline" {
				baselines[r.kase], _ = r.get("ns/op")
			}
		}
		for _, r := range rows {
			ns, _ := r.get("ns/op")
			ratio := "–"
			if base, ok := baselines[r.kase]; ok && base > 0 && r.variant != "baseline" {
				ratio = fmt.Sprintf("%.2fx", ns/base)
			}
			fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s | %s |\n", r.kase, r.variant, number(ns), ratio,
				optional(r, "allocs/op"), optional(r, "B/op"), others(r))
		}
	}
	return b.String()
}

func optional(r result, unit string) string {
	if v, ok := r.get(unit); ok {
		return number(v)
	}
	return ""
}

// others lists the figures a benchmark reported itself.
func others(r result) string {
	var out []string
	for _, m := range r.metrics {
		if !slices.Contains([]string{"ns/op", "B/op", "allocs/op"}, m.unit) {
			out = append(out, number(m.value)+" "+m.unit)
		}
	}
	return strings.Join(out, ", ")
}

func number(v float64) string {
	if v == float64(int64(v)) {
		return strconv.FormatInt(int64(v), 10)
	}
	return strconv.FormatFloat(v, 'g', 4, 64)
}

// notesHeading starts the part of the file written by hand: what earlier
// runs showed and what changed the figures. Every run keeps it as it is,
// after the tables.
const notesHeading = "\n## Notes on earlier runs\n"

// rewrite is the file a run writes over previous: its tables (with, when
// merge is set, the previous tables of families it did not measure), then
// previous's notes.
func rewrite(previous, tables string, merge bool) string {
	previousTables, notes := previous, ""
	if i := strings.Index(previous, notesHeading); i >= 0 {
		previousTables, notes = previous[:i], previous[i:]
	}
	if merge {
		tables = mergeSections(previousTables, tables)
	}
	return tables + notes
}

// mergeSections is doc with, after its own family sections, those of
// previous (an earlier benchdoc output) whose family doc lacks, each marked
// with the run it is from.
func mergeSections(previous, doc string) string {
	header, _, _ := strings.Cut(previous, "\n## ")
	_, written, _ := strings.Cut(header, "Written by ")
	earlierRun, _, _ := strings.Cut(written, "\n")
	var b strings.Builder
	b.WriteString(doc)
	for i, section := range strings.Split(previous, "\n## ") {
		family, _, _ := strings.Cut(section, "\n")
		if i == 0 || strings.Contains(doc, "\n## "+family+"\n") {
			continue
		}
		body := strings.TrimPrefix(section, family+"\n")
		if !strings.HasPrefix(body, "\nKept from an earlier run: ") { // kept once already: its run is named
			body = "\nKept from an earlier run: " + earlierRun + "\n" + body
		}
		fmt.Fprintf(&b, "\n## %s\n%s", family, body)
	}
	return b.String()
}
