// Package status writes what a reconcile found into the LBRegistrar's
// status: the ownership record (signed, package ownership), the conditions
// and the health summaries. It owns the status subresource and nothing
// else: it reads no cluster view and calls no OCI API; what it records
// reaches it as an Outcome and as the records its caller changed.
//
// A reconcile opens one Writer and flushes it on the way out. The one
// other flush is the intent record before a write that adds backends
// (Writer.Intend): the record must name a backend before OCI registers it,
// so that a crash between the two never leaves a backend no record owns.
package status

import (
	"context"
	"errors"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/peppy-ratio/lbregistrar/api/v1beta1"
	"github.com/peppy-ratio/lbregistrar/reconciler/metrics"
	"github.com/peppy-ratio/lbregistrar/reconciler/ownership"
)

// writeTimeout bounds one status write, also after shutdown began.
const writeTimeout = 10 * time.Second

// Writers opens the status writer of each reconcile of one controller, and
// remembers what they wrote.
type Writers struct {
	client client.Client
	// reader reads past the cache, which a leader shutting down no longer updates.
	reader client.Reader
	events events.EventRecorder
	// keys, when set, vouches for and signs the ownership records.
	keys    *ownership.KeyStore
	slots   slots
	written ownWrites
}

// NewWriters returns Writers writing through c, with at most
// writesAtOnce writes in progress (no bound when 0).
func NewWriters(c client.Client, reader client.Reader, ev events.EventRecorder, keys *ownership.KeyStore, writesAtOnce int) *Writers {
	r := &Writers{client: c, reader: reader, events: ev, keys: keys}
	if writesAtOnce > 0 {
		r.slots = make(slots, writesAtOnce)
	}
	return r
}

// Writer patches the status subresource of one reconcile's object with what
// changed since the last patch. Patches carry the resourceVersion they were
// computed from, so a writer with a stale view (a leader that lost its
// lease, a reconcile that raced another) cannot overwrite a newer
// ownership record.
type Writer struct {
	rec  *Writers
	obj  *v1beta1.LBRegistrar
	base *v1beta1.LBRegistrar
}

// Open is the status writer of one reconcile of obj. An ownership record
// this controller cannot vouch for (package ownership) is dropped from obj
// first, so the reconcile acts as if there were none; the writer's base
// keeps it, so the next status write removes it from the stored object too.
func (r *Writers) Open(ctx context.Context, obj *v1beta1.LBRegistrar) (*Writer, error) {
	st := &Writer{rec: r, obj: obj, base: obj.DeepCopy()}
	vouched, err := r.vouched(ctx, obj)
	if err != nil {
		return nil, err
	}
	if !vouched {
		metrics.UnverifiedRecords.Inc()
		log.FromContext(ctx).Info("the ownership record in status is not signed by this controller; it is ignored: nothing it lists is removed",
			"recordedLoadBalancer", obj.Status.LoadBalancerID, "recordedBackendSets", len(obj.Status.BackendSets))
		r.events.Eventf(obj, nil, corev1.EventTypeWarning, v1beta1.ReasonRecordUnverified, "VerifyOwnership",
			"the ownership record in status does not carry this controller's signature (written by another writer, restored from a backup, or from before lbregistrar was installed): it is ignored, nothing it lists is removed, and backends this resource wants are adopted as registered")
		ownership.Drop(obj)
	}
	return st, nil
}

// Object is the object the writer records; the reconcile changes its status.
func (s *Writer) Object() *v1beta1.LBRegistrar { return s.obj }

// Behind reports whether obj, as the cache has it, is not the version this
// process last wrote (an older one, or one written since by someone else):
// then the reconcile reads past the cache, or its patch would be computed
// from a version before its own write and refused with a conflict.
func (r *Writers) Behind(obj *v1beta1.LBRegistrar) bool { return r.written.behind(obj) }

// Forget drops what is kept of a resource that is gone.
func (r *Writers) Forget(name string) { r.written.forget(name) }

// slots bounds the status writes in progress at once. Flights record
// ownership without occupying a reconcile worker, so a node joining a cluster
// with 100 load balancers would send 100 records of thousands of backends at
// once, more than an API server finishes within writeTimeout; a write that
// timed out was still paid for by the API server, and is sent again. The
// bound is --reconcile-workers: as many as were in progress when a worker
// did each write.
type slots chan struct{}

// take waits for a slot; nil slots have one for everybody.
func (s slots) take() {
	if s != nil {
		s <- struct{}{}
	}
}

func (s slots) give() {
	if s != nil {
		<-s
	}
}

// ownWrites remembers the resourceVersion each resource's last status write
// by this process left. The cache learns of a write only from its watch, a
// moment later; a reconcile starting meanwhile (the one woken as a flight
// lands) would compute its patch from the version before and be refused
// with a conflict, which costs a backoff.
type ownWrites struct {
	mu       sync.Mutex
	versions map[string]string
}

func (w *ownWrites) wrote(obj *v1beta1.LBRegistrar) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.versions == nil {
		w.versions = map[string]string{}
	}
	w.versions[obj.Name] = obj.ResourceVersion
}

func (w *ownWrites) behind(obj *v1beta1.LBRegistrar) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	rv, ok := w.versions[obj.Name]
	return ok && rv != obj.ResourceVersion
}

func (w *ownWrites) forget(name string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.versions, name)
}

// Flush writes what changed in the object's status since the last flush.
func (s *Writer) Flush(ctx context.Context) error { return s.flush(ctx, func() {}) }

// flush is Flush, calling takeBack, when the write fails, before a
// conflict's rebase: it takes from the object what must not be recorded.
func (s *Writer) flush(ctx context.Context, takeBack func()) error {
	if err := s.sign(ctx); err != nil {
		return err
	}
	// Only status reaches the subresource. Compared in place: a patch of a
	// record of thousands of backends is costly to build just to find it empty.
	if equality.Semantic.DeepEqual(s.base.Status, s.obj.Status) {
		metrics.SetConditions(s.obj.Name, s.obj.Status.Conditions)
		return nil
	}
	// A write already accepted by OCI must still be recorded during
	// shutdown, within what the shutdown budget keeps for it. The wait for
	// a slot is not part of the write's time: others' writes bound it.
	s.rec.slots.take()
	defer s.rec.slots.give()
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), writeTimeout)
	defer cancel()
	err := s.rec.client.Status().Patch(ctx, s.obj, client.MergeFromWithOptions(s.base, client.MergeFromWithOptimisticLock{}))
	if err != nil {
		takeBack()
	}
	if apierrors.IsConflict(err) {
		// The conflict makes the reconcile run again from a fresh read.
		return errors.Join(err, s.rebase(ctx))
	}
	if err != nil {
		return err
	}
	s.rec.written.wrote(s.obj)
	s.base = s.obj.DeepCopy()
	metrics.SetConditions(s.obj.Name, s.obj.Status.Conditions)
	return nil
}

// Intend stores the ownership record ahead of writes that add backends
// (the intent): for each backend set in owned, the backends its entry owns
// once the writes have added theirs. OCI must never have a backend that no
// stored record names. An intent that could not be stored is taken back
// from the object, with the record's load balancer when this flush was the
// first to carry it: the writes that needed it are not made, so a later
// flush must not record what nothing registered.
func (s *Writer) Intend(ctx context.Context, owned map[string][]v1beta1.Backend) error {
	was := make(map[string]*v1beta1.BackendSetStatus, len(owned))
	for name, backends := range owned {
		was[name] = FindEntry(s.obj, name).DeepCopy()
		Entry(s.obj, name).SetOwned(backends)
	}
	s.rec.WarnLargeRecord(s.obj)
	return s.flush(ctx, func() {
		for name, entry := range was {
			if entry == nil {
				DropEntry(s.obj, name)
			} else {
				*FindEntry(s.obj, name) = *entry
			}
		}
		s.obj.Status.LoadBalancerID = s.base.Status.LoadBalancerID
	})
}

// sign signs the ownership record about to be written; one that is not
// there carries no signature.
func (s *Writer) sign(ctx context.Context) error { return s.signRecord(ctx, s.obj) }

func (s *Writer) signRecord(ctx context.Context, obj *v1beta1.LBRegistrar) error {
	if s.rec.keys == nil || !ownership.Recorded(obj) {
		obj.Status.RecordSignature = ""
		return nil
	}
	key, err := s.rec.keys.KeyToSign(ctx)
	if err != nil {
		return err
	}
	obj.Status.RecordSignature = ownership.Sign(key, obj)
	return nil
}

// rebase records, on top of the status someone else wrote meanwhile, the
// work requests this writer saw through, which only it knows (a leader
// finishing a write while it shuts down), and the conditions and
// ownership record entries it changed that nobody else changed since it
// read them: a flight's verdict, and what its writes did in OCI, outlive a
// spec edit made while it was in the air, which a suspension would
// otherwise freeze unseen (the record naming a backend the flight
// removed). What the newer status changed itself, and everything else, it
// keeps; the next reconcile starts from it.
func (s *Writer) rebase(ctx context.Context) error {
	seen := map[string]*v1beta1.WorkRequest{}
	for _, bs := range s.obj.Status.BackendSets {
		if bs.LastWorkRequest != nil && !equality.Semantic.DeepEqual(bs.LastWorkRequest, LastWorkRequest(s.base, bs.Name)) {
			seen[bs.Name] = bs.LastWorkRequest
		}
	}
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur := &v1beta1.LBRegistrar{}
		if err := s.rec.reader.Get(ctx, client.ObjectKeyFromObject(s.obj), cur); err != nil {
			return err
		}
		base := cur.DeepCopy()
		wrs, conditions := mergeWorkRequests(cur, seen), mergeConditions(cur, s.base, s.obj)
		vouched, err := s.rec.vouched(ctx, cur)
		if err != nil {
			return err
		}
		records := vouched && mergeRecords(cur, s.base, s.obj)
		if !wrs && !conditions && !records {
			return nil
		}
		if records {
			if err := s.signRecord(ctx, cur); err != nil {
				return err
			}
		}
		if err := s.rec.client.Status().Patch(ctx, cur, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{})); err != nil {
			return err
		}
		s.rec.written.wrote(cur)
		return nil
	})
}

// vouched reports whether obj's ownership record is one this controller
// signed, or there is none (ownership.Vouched); with no key store nothing
// is signed, so no record is. A reconcile acts only on such a record
// (Open), and a rebase puts a flight's entries only on top of one and
// signs the whole (rebase): a record another writer put there (a
// forgery, a restore from a backup) would otherwise get the controller's
// signature, and its backends be removed as the resource's own.
func (r *Writers) vouched(ctx context.Context, obj *v1beta1.LBRegistrar) (bool, error) {
	if !ownership.Recorded(obj) {
		return true, nil
	}
	if r.keys == nil {
		return false, nil
	}
	key, err := r.keys.Key(ctx)
	if err != nil {
		return false, err
	}
	return ownership.Vouched(key, obj), nil
}

// mergeRecords sets on cur the ownership record entries ours changed
// from base (backends registered, removed, drained) that cur still has as
// base had them, and the record's load balancer likewise, and reports
// whether it set any.
func mergeRecords(cur, base, ours *v1beta1.LBRegistrar) bool {
	changed := false
	if ours.Status.LoadBalancerID != base.Status.LoadBalancerID && cur.Status.LoadBalancerID == base.Status.LoadBalancerID {
		cur.Status.LoadBalancerID = ours.Status.LoadBalancerID
		changed = true
	}
	var names []string
	for _, obj := range []*v1beta1.LBRegistrar{base, ours} {
		for _, bs := range obj.Status.BackendSets {
			names = append(names, bs.Name)
		}
	}
	slices.Sort(names)
	for _, name := range slices.Compact(names) {
		was, now := recordOf(FindEntry(base, name)), recordOf(FindEntry(ours, name))
		if equality.Semantic.DeepEqual(was, now) || !equality.Semantic.DeepEqual(was, recordOf(FindEntry(cur, name))) {
			continue
		}
		if now == nil {
			DropEntry(cur, name)
		} else {
			e := Entry(cur, name)
			e.Backends, e.Drained, e.Draining = now.Backends, now.Drained, now.Draining
		}
		changed = true
	}
	return changed
}

// ownedRecord is what an entry says this resource owns in its backend set.
type ownedRecord struct {
	Backends []v1beta1.BackendGroup
	Drained  bool
	Draining []v1beta1.DrainingGroup
}

func recordOf(e *v1beta1.BackendSetStatus) *ownedRecord {
	if e == nil {
		return nil
	}
	c := e.DeepCopy()
	return &ownedRecord{Backends: c.Backends, Drained: c.Drained, Draining: c.Draining}
}

// mergeConditions sets on cur the conditions ours changed from base that
// cur still has as base had them, and reports whether it set any.
func mergeConditions(cur, base, ours *v1beta1.LBRegistrar) bool {
	changed := false
	for _, c := range ours.Status.Conditions {
		was := meta.FindStatusCondition(base.Status.Conditions, c.Type)
		if sameCondition(was, &c) || !sameCondition(was, meta.FindStatusCondition(cur.Status.Conditions, c.Type)) {
			continue
		}
		meta.SetStatusCondition(&cur.Status.Conditions, c)
		changed = true
	}
	return changed
}

func sameCondition(a, b *metav1.Condition) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.Status == b.Status && a.Reason == b.Reason && a.Message == b.Message && a.ObservedGeneration == b.ObservedGeneration
}

// mergeWorkRequests sets the last work request of obj's records to the ones
// seen, unless a record has a later one. A backend set obj has no record
// for gets none: whoever dropped it owns nothing there. It reports whether
// anything changed.
func mergeWorkRequests(obj *v1beta1.LBRegistrar, seen map[string]*v1beta1.WorkRequest) bool {
	changed := false
	for name, wr := range seen {
		rec := FindEntry(obj, name)
		if rec == nil || equality.Semantic.DeepEqual(rec.LastWorkRequest, wr) ||
			(rec.LastWorkRequest != nil && rec.LastWorkRequest.ID != wr.ID && rec.LastWorkRequest.Time.After(wr.Time.Time)) {
			continue
		}
		rec.LastWorkRequest = wr.DeepCopy()
		changed = true
	}
	return changed
}
