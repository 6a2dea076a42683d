package reconciler

import (
	"cmp"
	"context"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/peppy-ratio/lbregistrar/api/v1beta1"
	"github.com/peppy-ratio/lbregistrar/reconciler/backendset"
	"github.com/peppy-ratio/lbregistrar/reconciler/decide"
	"github.com/peppy-ratio/lbregistrar/reconciler/lanes"
	"github.com/peppy-ratio/lbregistrar/reconciler/oci"
	"github.com/peppy-ratio/lbregistrar/reconciler/plan"
	"github.com/peppy-ratio/lbregistrar/reconciler/readiness"
	"github.com/peppy-ratio/lbregistrar/reconciler/status"
)

// ociAPI is what a reconcile needs from OCI; *oci.Client implements it.
type ociAPI interface {
	backendset.API
	backendset.HealthReader
	// PrivateIPs reads for decide (a decide.OCI).
	PrivateIPs(ctx context.Context, instanceID string, want []netip.Addr) (oci.PrivateIPs, error)
	// WorkRequestsSince lists for the watch (an lbwatch.Lister).
	WorkRequestsSince(ctx context.Context, loadBalancerID string, since time.Time) ([]oci.WorkRequest, error)
}

// setWrite is one backend set's write in a flight: the job decide made,
// which the write only reads, and what the write learns on its way.
type setWrite struct {
	job      *decide.Job
	read     *oci.BackendSet // as read on this turn; nil when its read failed
	noAdds   bool            // OCI refused its additions: written without them
	changing bool            // planned to be written
	after    []plan.Backend  // the set once in line: as written, or as read
	blocked  string          // why wanted backends are not written, for the readiness gates
	reserved int             // the load balancer's room kept for backend sets that wait before it
}

// registers reports whether the resource registers backends in w's
// backend set (applies or holds its desired state there), rather than
// leaving it: only such a set has backends for the readiness gates.
func (w *setWrite) registers() bool { return w.job.Mode == plan.Apply || w.job.Mode == plan.Hold }

// input is the plan input of w's backend set with current registered.
func (w *setWrite) input(obj *v1beta1.LBRegistrar, current []plan.Backend) plan.Input {
	in := w.job.Input(obj, current, w.read.BackendLimit(w.reserved))
	in.NoAdds = w.noAdds
	return in
}

// write brings the backend sets of the load balancer whose lane is taken in
// line, one write at a time, as OCI requires, sparing what decide found
// other resources record there. The reads to plan and the intent record
// come first, for all of them at once, so the writes follow each other
// with only the read each needs for a current ETag in between.
func (r *Reconciler) write(ctx context.Context, s *scope, jobs []decide.Job) {
	s.turn.Step(lanes.Reading, "", "")
	if r.opts.DryRun {
		r.holdWrites(ctx, s, jobs)
		return
	}
	writes, intents, changing := r.prepare(ctx, s, jobs)
	if err := s.st.Intend(ctx, intents); err != nil {
		s.logger.Error(err, "recording the intended ownership; nothing written", "backendSets", changing)
		s.out.Fail("*", err)
		return
	}
	if len(changing) > 0 {
		r.gatesBeforeWrites(ctx, s, writes)
	}
	// Health is read for the backend sets that now have what this resource
	// keeps registered: one whose write failed may lack backends the record
	// names, which OCI's health, listing only the backends it has, would
	// count as OK; and backends being drained or removed are on their way out.
	var inLine []string
	// A classic load balancer has one ETag, which every write to it moves,
	// so a set written after another is read again first; an NLB's ETags
	// are per backend set, so prepare's reads stay current for the sets not
	// written yet (docs/oci-emulator.md, "Etags"; should another set's
	// write move them after all, OCI answers 412 and the set is read again).
	perSet := oci.IsNetworkLoadBalancer(s.lb)
	current := true // no write since prepare's reads
	for _, w := range writes {
		if r.writeSet(ctx, s, w, current) && w.registers() {
			inLine = append(inLine, w.job.Name)
		}
		current = current && (perSet || !w.changing)
	}
	var health map[string]*oci.BackendSetHealth
	readAt := time.Now() // the health read below reports checks made up to its answer, after this
	switch {
	case !r.opts.BackendHealth:
		status.SetHealth(s.obj, nil, &s.out) // nothing read; health an earlier run recorded is cleared
	case r.flights.Awaited(s.obj.Name):
		// A reconcile is parked behind this one (a change came in during
		// the writes): it reads health after its own writes, moments from
		// now, and the status keeps what was read before until then.
		status.KeepHealth(s.obj, &s.out)
	default:
		health = backendset.ReadHealth(ctx, s.oci, s.lb, inLine)
		status.SetHealth(s.obj, health, &s.out)
	}
	r.learnGates(s, writes, health, readAt)
}

// prepare reads the backend sets decide did not read, all at once, and
// plans each: additions OCI refused whose retry is not due are left out.
// It returns the writes, the intent (what each backend set's record entry
// owns once the writes have added theirs, to be stored before any write),
// and the names of the backend sets that change.
func (r *Reconciler) prepare(ctx context.Context, s *scope, jobs []decide.Job) ([]*setWrite, map[string][]v1beta1.Backend, []string) {
	writes := make([]*setWrite, 0, len(jobs))
	var unread []string
	for i := range jobs {
		j := &jobs[i]
		if j.Err != nil {
			s.logger.Error(j.Err, "listing the other claimants of the backend set", "backendSet", j.Name)
			continue
		}
		writes = append(writes, &setWrite{job: j, read: j.Read, reserved: r.waiters.Ahead(s.lb, s.obj.Name, j.Name)})
		if j.Read == nil {
			unread = append(unread, j.Name)
		}
	}
	read := backendset.ReadAll(ctx, s.oci, s.lb, unread)
	var changing []string
	intents := map[string][]v1beta1.Backend{}
	for _, w := range writes {
		if w.read == nil {
			w.read = read[w.job.Name]
		}
		if w.read == nil {
			continue // its sync reads it again, and reports what it finds
		}
		in := w.input(s.obj, w.read.Backends)
		p := plan.Compute(in)
		if rej := r.refusals.InForce(s.obj.Name, w.job.Name, s.obj.Generation, p.Added, time.Now()); rej != nil && !s.deleting {
			s.logger.V(1).Info("OCI refused adding these backends; the backend set is written without them until their retry", "backendSet", w.job.Name,
				"withheld", len(p.Added), "retryAt", rej.RetryAt, "error", rej.Err.Error())
			w.blocked = s.out.Refused(w.job.Name, len(p.Added), rej.Err, rej.RetryAt)
			w.noAdds = true
			in = w.input(s.obj, w.read.Backends)
			p = plan.Compute(in)
		}
		if !p.Changed() {
			continue
		}
		w.changing = true
		changing = append(changing, w.job.Name)
		if len(p.Added) > 0 {
			intents[w.job.Name] = plan.Intent(in.Owned, &p)
		}
	}
	if len(changing) > 0 && !s.deleting {
		// The intent record says the writes are under way; the outcome
		// on the way out no longer does.
		writing := s.out
		writing.Phase = &status.Failure{Reason: v1beta1.ReasonRegistering, Message: "writing backend sets " + strings.Join(changing, ", ")}
		status.SetConditions(s.obj, &writing)
	}
	return writes, intents, changing
}

// writeSet brings one backend set in line (backendset.Sync), then judges
// how that ended and carries the verdict out (verdict.go). A write OCI
// refused for what it adds is sent again at once without the additions:
// what it removes, re-weights or drains does not wait for them. current
// says nothing was written since w's backend set was read. It reports
// whether the backend set now has what the record says.
func (r *Reconciler) writeSet(ctx context.Context, s *scope, w *setWrite, current bool) bool {
	for {
		res, err := backendset.Sync(ctx, s.oci, r.opts.Backoff, r.syncRequest(ctx, s, w, current))
		v := judge(w, s.deleting, res, err)
		r.carryOut(ctx, s, w, &res, v)
		if v.kind == inLine {
			w.after = res.Plan.Backends
		}
		if v.kind != refused {
			return v.kind == inLine
		}
		w.noAdds, current = true, false
	}
}

// syncRequest is what backendset.Sync needs to bring w's backend set in line.
func (r *Reconciler) syncRequest(ctx context.Context, s *scope, w *setWrite, current bool) backendset.Request {
	name := w.job.Name
	return backendset.Request{
		LoadBalancerID: s.lb,
		Name:           name,
		Prefetched:     w.read,
		Current:        current,
		Last:           status.LastWorkRequest(s.obj, name),
		WaitTimeout:    r.opts.WorkRequestTimeout,
		ShutdownWait:   r.opts.ShutdownWait,
		Turn:           s.turn,
		Input:          func(current []plan.Backend) plan.Input { return w.input(s.obj, current) },
		RecordIntent: func(owned []v1beta1.Backend) error {
			if rec := status.FindEntry(s.obj, name); rec != nil && slices.Equal(rec.Owned(), owned) {
				return nil // recorded ahead, by prepare
			}
			return s.st.Intend(ctx, map[string][]v1beta1.Backend{name: owned})
		},
	}
}

// holdWrites is write under --dry-run: it plans every job as lbregistrar
// plan does and, instead of writing, reports each write it would make as an
// Event, in lbregistrar_pending_writes and the lanes view, and in out for
// the Ready condition. The ownership record stays as it is.
func (r *Reconciler) holdWrites(ctx context.Context, s *scope, jobs []decide.Job) {
	obj, out := s.obj, &s.out
	changes := decide.Changes(ctx, s.oci, obj, s.lb, jobs, out)
	for i := range changes {
		c := &changes[i]
		if !c.Changed() {
			continue
		}
		out.Pending = append(out.Pending, fmt.Sprintf("backend set %q: %s", c.BackendSet, c.Details()))
		r.events.Eventf(obj, nil, corev1.EventTypeNormal, v1beta1.ReasonDryRun, "UpdateBackendSet",
			"dry run, not written: backend set %q: %s", c.BackendSet, c.Details())
	}
	r.pending.Set(obj.Name, s.lb, changes)
}

// learnGates records, for the readiness gates, what this flight found of
// its backend sets (readiness.Record): each with the backends it now has, with
// what the desired state made of the gated pods and what kept wanted
// backends out; a set that belongs to another resource, blocked by that.
func (r *Reconciler) learnGates(s *scope, writes []*setWrite, health map[string]*oci.BackendSetHealth, readAt time.Time) {
	rec := readiness.Record{Generation: s.obj.Generation, Sets: map[string]*readiness.Set{}}
	for _, w := range writes {
		if !w.registers() {
			continue
		}
		blocked := w.blocked
		if w.job.Held != nil {
			blocked = cmp.Or(blocked, "its desired state is held: "+w.job.Held.Message)
		}
		rec.Sets[w.job.Name] = readiness.NewSet(w.after, health[w.job.Name], readAt, w.read.HealthSchedule(), w.job.Stands, blocked)
	}
	for name, keeper := range s.out.Lost {
		rec.Sets[name] = readiness.NewSet(nil, nil, time.Time{}, oci.HealthSchedule{}, nil, fmt.Sprintf("LBRegistrar %s keeps this backend set (Conflict), so this resource writes nothing there", keeper))
	}
	r.seen.Put(s.obj.Name, rec, time.Now())
	r.gates.Learned(s.obj.Name)
}

// gatesBeforeWrites gives the pods waiting for OCI to find their backends
// healthy a verdict before this flight's writes, each of which waits for
// its work request: their backends are registered already, and their
// health is no less true for writes of other backends to come. Otherwise
// a gate whose backend turned OK during a rollout would wait for the
// writes of the next pods (a work request each) before its health is
// read. The backend sets are taken as read, and their health read now.
func (r *Reconciler) gatesBeforeWrites(ctx context.Context, s *scope, writes []*setWrite) {
	if !r.opts.BackendHealth || !r.gates.AwaitsHealth(s.obj.Name) {
		return
	}
	asRead := make([]*setWrite, 0, len(writes))
	var names []string
	for _, w := range writes {
		if w.read == nil || !w.registers() {
			continue
		}
		before := *w
		before.after = w.read.Backends
		asRead = append(asRead, &before)
		names = append(names, w.job.Name)
	}
	readAt := time.Now()
	r.learnGates(s, asRead, backendset.ReadHealth(ctx, s.oci, s.lb, names), readAt)
}

// gatesBlocked records, for the readiness gates, that nothing of obj is
// written, and why.
func (r *Reconciler) gatesBlocked(obj *v1beta1.LBRegistrar, why string) {
	r.seen.Put(obj.Name, readiness.Record{Generation: obj.Generation, Blocked: why}, time.Now())
	r.gates.Learned(obj.Name)
}
