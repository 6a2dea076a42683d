package reconciler

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/peppy-ratio/lbregistrar/api/v1beta1"
	"github.com/peppy-ratio/lbregistrar/reconciler/metrics"
	"github.com/peppy-ratio/lbregistrar/reconciler/ownership"
)

// setConditions derives Ready, Degraded and Conflict from one reconcile's outcome.
func setConditions(obj *v1beta1.LBRegistrar, out *outcome, ce *credentialError) {
	if len(out.lost) > 0 {
		var msgs []string
		for _, name := range sortedKeys(out.lost) {
			msgs = append(msgs, fmt.Sprintf("backend set %q is kept by LBRegistrar %s; this resource registers nothing there until that one releases it", name, out.lost[name]))
		}
		setCondition(obj, v1beta1.ConditionConflict, metav1.ConditionTrue, ReasonClaimed, strings.Join(msgs, "; "))
	} else {
		setCondition(obj, v1beta1.ConditionConflict, metav1.ConditionFalse, ReasonAsExpected, "no other LBRegistrar claims these backend sets")
	}

	if len(out.issues) > 0 || len(out.unhealthy) > 0 {
		reason := ReasonBackendsUnhealthy
		if len(out.issues) > 0 {
			reason = out.issues[0].Reason
		}
		var msgs []string
		for _, is := range out.issues {
			msgs = append(msgs, is.Message)
		}
		setCondition(obj, v1beta1.ConditionDegraded, metav1.ConditionTrue, reason, strings.Join(append(msgs, out.unhealthy...), "; "))
	} else {
		setCondition(obj, v1beta1.ConditionDegraded, metav1.ConditionFalse, ReasonAsExpected, "every target resolved")
	}

	switch {
	case ce != nil:
		setCondition(obj, v1beta1.ConditionReady, metav1.ConditionFalse, ce.reason, ce.message)
	case len(out.failures) > 0:
		setCondition(obj, v1beta1.ConditionReady, metav1.ConditionFalse, ReasonWriteFailed, strings.Join(out.failures, "; "))
	case len(out.pending) > 0:
		setCondition(obj, v1beta1.ConditionReady, metav1.ConditionFalse, ReasonDryRun,
			"dry run, nothing written; pending: "+strings.Join(out.pending, "; "))
	case len(out.held) > 0:
		setCondition(obj, v1beta1.ConditionReady, metav1.ConditionFalse, ReasonHeld,
			fmt.Sprintf("backend sets %s keep their registered backends until the Degraded condition clears", strings.Join(out.held, ", ")))
	case len(out.lost) > 0:
		setCondition(obj, v1beta1.ConditionReady, metav1.ConditionFalse, ReasonClaimed, "see the Conflict condition")
	default:
		setCondition(obj, v1beta1.ConditionReady, metav1.ConditionTrue, v1beta1.ReasonRegistered, "every backend set holds the backends this resource should own")
	}
}

// logDecisions logs why backend sets were left alone: at Info when the
// condition that reports it changed in this reconcile, at V(1) when it only
// repeats, so a lasting conflict or hold is not logged on every reconcile.
func logDecisions(logger logr.Logger, before []metav1.Condition, obj *v1beta1.LBRegistrar, out *outcome) {
	at := func(typ string) logr.Logger {
		was, is := meta.FindStatusCondition(before, typ), meta.FindStatusCondition(obj.Status.Conditions, typ)
		if was == nil || is == nil || was.Status != is.Status || was.Reason != is.Reason || was.Message != is.Message {
			return logger
		}
		return logger.V(1)
	}
	for _, name := range sortedKeys(out.lost) {
		at(v1beta1.ConditionConflict).Info("backend set kept by another LBRegistrar; registering nothing there",
			"backendSet", name, "keptBy", out.lost[name])
	}
	for _, is := range out.issues {
		at(v1beta1.ConditionDegraded).Info("target not resolved", "reason", is.Reason, "detail", is.Message)
	}
	for _, msg := range out.unhealthy {
		at(v1beta1.ConditionDegraded).Info("OCI reports own backends unhealthy", "reason", ReasonBackendsUnhealthy, "detail", msg)
	}
	for _, name := range out.held {
		at(v1beta1.ConditionReady).Info("backend set held: its registered backends stay until the Degraded condition clears", "backendSet", name)
	}
}

func setCondition(obj *v1beta1.LBRegistrar, typ string, status metav1.ConditionStatus, reason, message string) {
	const maxMessage = 32768 // the schema's limit on condition messages
	if len(message) > maxMessage {
		message = message[:maxMessage-3] + "..."
	}
	meta.SetStatusCondition(&obj.Status.Conditions, metav1.Condition{
		Type: typ, Status: status, Reason: reason, Message: message, ObservedGeneration: obj.Generation,
	})
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// recordWarnBytes is the size of a resource's ownership records past which
// it is warned: etcd refuses an object past 1.5 MiB by default
// (--max-request-bytes), and a resource whose intended record cannot be
// stored registers nothing more. At 5,000 nodes a backend set's record is
// about 60 kB, so the warning comes near 17 backend sets.
const recordWarnBytes = 1 << 20

// warnLargeRecord warns when obj's ownership records near the size the API
// server can store, while splitting the resource is still a choice.
func (r *Reconciler) warnLargeRecord(obj *v1beta1.LBRegistrar) {
	size := recordBytes(obj)
	if size < recordWarnBytes {
		return
	}
	backends := 0
	for _, rec := range obj.Status.BackendSets {
		backends += rec.OwnedCount()
	}
	r.events.Eventf(obj, nil, corev1.EventTypeWarning, ReasonRecordLarge, "RecordOwnership",
		"the ownership record holds %d backends in %d backend sets, about %d KiB; past about 1.5 MiB (etcd's default request limit) the API server cannot store it, and this resource registers nothing more: split its services among more LBRegistrars",
		backends, len(obj.Status.BackendSets), size>>10)
}

// recordBytes is about the size of obj's ownership records in JSON,
// counted without encoding them.
func recordBytes(obj *v1beta1.LBRegistrar) int {
	size := 0
	for _, rec := range obj.Status.BackendSets {
		size += len(`{"name":"","backends":[]},`) + len(rec.Name)
		for _, g := range rec.Backends {
			size += len(`{"port":00000,"weight":000,"addresses":""},`) + len(g.Addresses) + len(g.IP)
			for _, ip := range g.IPs {
				size += len(ip) + len(`"",`)
			}
		}
	}
	return size
}

// findRecord returns obj's ownership record for a backend set, or nil.
func findRecord(obj *v1beta1.LBRegistrar, name string) *v1beta1.BackendSetStatus {
	for i := range obj.Status.BackendSets {
		if obj.Status.BackendSets[i].Name == name {
			return &obj.Status.BackendSets[i]
		}
	}
	return nil
}

// record returns obj's ownership record for a backend set, adding an empty one if needed.
func record(obj *v1beta1.LBRegistrar, name string) *v1beta1.BackendSetStatus {
	if rec := findRecord(obj, name); rec != nil {
		return rec
	}
	obj.Status.BackendSets = append(obj.Status.BackendSets, v1beta1.BackendSetStatus{Name: name})
	slices.SortFunc(obj.Status.BackendSets, func(a, b v1beta1.BackendSetStatus) int { return strings.Compare(a.Name, b.Name) })
	return findRecord(obj, name)
}

func dropRecord(obj *v1beta1.LBRegistrar, name string) {
	obj.Status.BackendSets = slices.DeleteFunc(obj.Status.BackendSets, func(s v1beta1.BackendSetStatus) bool { return s.Name == name })
}

// statusWriteTimeout bounds one status write, also after shutdown began.
const statusWriteTimeout = 10 * time.Second

// statusWriter patches the status subresource with what changed since the
// last patch. Patches carry the resourceVersion they were computed from, so a
// writer with a stale view (a leader that lost its lease, a reconcile that
// raced another) cannot overwrite a newer ownership record.
type statusWriter struct {
	client client.Client
	// reader reads past the cache, which a leader shutting down no longer updates.
	reader client.Reader
	obj    *v1beta1.LBRegistrar
	base   *v1beta1.LBRegistrar
	// written, when set, learns the version each write leaves.
	written *ownWrites
	// slots, when set, bounds the writes in progress.
	slots statusSlots
	// records, when set, signs the ownership record on each write.
	records *ownership.KeyStore
}

// statusWriterFor is the status writer of one reconcile of obj. An
// ownership record this controller cannot vouch for (package ownership)
// is dropped from obj first, so the reconcile acts as if there were none;
// the writer's base keeps it, so the next status write removes it from the
// stored object too.
func (r *Reconciler) statusWriterFor(ctx context.Context, obj *v1beta1.LBRegistrar) (*statusWriter, error) {
	st := &statusWriter{client: r.client, reader: r.apiReader, obj: obj, base: obj.DeepCopy(), written: &r.ownWrites, slots: r.statusSlots, records: r.records}
	if !ownership.Recorded(obj) {
		return st, nil
	}
	key, err := r.records.Key(ctx)
	if err != nil {
		return nil, err
	}
	if !ownership.Vouched(key, obj) {
		metrics.UnverifiedRecords.Inc()
		log.FromContext(ctx).Info("the ownership record in status is not signed by this controller; it is ignored: nothing it lists is removed",
			"recordedLoadBalancer", obj.Status.LoadBalancerID, "recordedBackendSets", len(obj.Status.BackendSets))
		r.events.Eventf(obj, nil, corev1.EventTypeWarning, ReasonRecordUnverified, "VerifyOwnership",
			"the ownership record in status does not carry this controller's signature (written by another writer, restored from a backup, or from before lbregistrar was installed): it is ignored, nothing it lists is removed, and backends this resource wants are adopted as registered")
		ownership.Drop(obj)
	}
	return st, nil
}

// statusSlots bounds the status writes in progress at once. Flights record
// ownership without holding a reconcile worker, so a node joining a cluster
// with 100 load balancers would send 100 records of thousands of backends at
// once, more than an API server finishes within statusWriteTimeout; a write
// that timed out was still paid for by the API server, and is sent again.
// The bound is --reconcile-workers: as many as were in progress when a
// worker did each write.
type statusSlots chan struct{}

// take waits for a slot; a nil statusSlots has one for everybody.
func (s statusSlots) take() {
	if s != nil {
		s <- struct{}{}
	}
}

func (s statusSlots) give() {
	if s != nil {
		<-s
	}
}

// ownWrites remembers the resourceVersion each resource's last status write
// by this process left. The cache learns of a write only from its watch, a
// moment later; a reconcile starting meanwhile (the one woken as a flight
// lands) would compute its patch from the version before and be refused
// with a conflict, which costs a backoff. Reconcile reads past the cache
// while the cache shows another version than the last write.
type ownWrites struct {
	mu       sync.Mutex
	versions map[string]string
}

func (w *ownWrites) wrote(obj *v1beta1.LBRegistrar) {
	if w == nil {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.versions == nil {
		w.versions = map[string]string{}
	}
	w.versions[obj.Name] = obj.ResourceVersion
}

// behind reports whether obj, as the cache has it, is not the version this
// process last wrote (an older one, or one written since by someone else).
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

func (s *statusWriter) flush(ctx context.Context) error {
	if err := s.sign(ctx); err != nil {
		return err
	}
	// Only status reaches the subresource. Compared in place: a patch of a
	// record of thousands of backends is costly to build just to find it empty.
	if equality.Semantic.DeepEqual(s.base.Status, s.obj.Status) {
		return nil
	}
	// A write already accepted by OCI must still be recorded during
	// shutdown, within what the shutdown budget keeps for it. The wait for
	// a slot is not part of the write's time: others' writes bound it.
	s.slots.take()
	defer s.slots.give()
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), statusWriteTimeout)
	defer cancel()
	err := s.client.Status().Patch(ctx, s.obj, client.MergeFromWithOptions(s.base, client.MergeFromWithOptimisticLock{}))
	if apierrors.IsConflict(err) {
		// The conflict makes the reconcile run again from a fresh read.
		return errors.Join(err, s.rebase(ctx))
	}
	if err != nil {
		return err
	}
	s.written.wrote(s.obj)
	s.base = s.obj.DeepCopy()
	return nil
}

// sign signs the ownership record about to be written; one that is not
// there carries no signature.
func (s *statusWriter) sign(ctx context.Context) error {
	if s.records == nil || !ownership.Recorded(s.obj) {
		s.obj.Status.RecordSignature = ""
		return nil
	}
	key, err := s.records.KeyToSign(ctx)
	if err != nil {
		return err
	}
	s.obj.Status.RecordSignature = ownership.Sign(key, s.obj)
	return nil
}

// rebase records, on top of the status someone else wrote meanwhile, the
// work requests this writer saw through, which only it knows (a leader
// finishing a write while it shuts down). The newer status keeps its
// ownership records and everything else; the next reconcile starts from it.
func (s *statusWriter) rebase(ctx context.Context) error {
	seen := map[string]*v1beta1.WorkRequest{}
	for _, bs := range s.obj.Status.BackendSets {
		if bs.LastWorkRequest != nil && !equality.Semantic.DeepEqual(bs.LastWorkRequest, lastWorkRequest(s.base, bs.Name)) {
			seen[bs.Name] = bs.LastWorkRequest
		}
	}
	if len(seen) == 0 {
		return nil
	}
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur := &v1beta1.LBRegistrar{}
		if err := s.reader.Get(ctx, client.ObjectKeyFromObject(s.obj), cur); err != nil {
			return err
		}
		base := cur.DeepCopy()
		if !mergeWorkRequests(cur, seen) {
			return nil
		}
		if err := s.client.Status().Patch(ctx, cur, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{})); err != nil {
			return err
		}
		s.written.wrote(cur)
		return nil
	})
}

// mergeWorkRequests sets the last work request of obj's records to the ones
// seen, unless a record holds a later one. A backend set obj has no record
// for gets none: whoever dropped it owns nothing there. It reports whether
// anything changed.
func mergeWorkRequests(obj *v1beta1.LBRegistrar, seen map[string]*v1beta1.WorkRequest) bool {
	changed := false
	for name, wr := range seen {
		rec := findRecord(obj, name)
		if rec == nil || equality.Semantic.DeepEqual(rec.LastWorkRequest, wr) ||
			(rec.LastWorkRequest != nil && rec.LastWorkRequest.ID != wr.ID && rec.LastWorkRequest.Time.After(wr.Time.Time)) {
			continue
		}
		rec.LastWorkRequest = wr.DeepCopy()
		changed = true
	}
	return changed
}

func lastWorkRequest(obj *v1beta1.LBRegistrar, backendSet string) *v1beta1.WorkRequest {
	if rec := findRecord(obj, backendSet); rec != nil {
		return rec.LastWorkRequest
	}
	return nil
}
