// Package plan computes, as a pure function, the backend list to write into
// one backend set so that it has what one LBRegistrar should own, while
// every backend the resource does not own stays exactly as it is.
//
// Ownership is the resource's status record: only backends recorded there are
// ever changed or removed. A desired backend that is already present is
// adopted into the record (that is how a resource migrated from the original
// operator, which kept no record, takes over what it registered), but for
// a pod's backend (Input.PodBackends): the original operator registered
// none, and a pod's address is what an EndpointSlice says. A backend
// another live resource records as its own is never removed.
//
// A backend the resource owns but no longer wants (its node left, was
// excluded, or stopped hosting the Service's endpoints) is drained first:
// marked drain, so the load balancer sends it no new connections while the
// open ones finish, kept for the drain period, then removed. One wanted
// again meanwhile serves again rather than being added anew.
package plan

import (
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/peppy-ratio/lbregistrar/api/v1beta1"
	"github.com/peppy-ratio/lbregistrar/reconciler/desired"
)

// Backend is one backend of a backend set, as far as planning is concerned.
// Whoever writes the plan carries every other field of an existing backend.
type Backend struct {
	IP string
	// TargetID is the instance OCID of an NLB backend given by instance;
	// such a backend may have no IP.
	TargetID string
	Port     int32
	Weight   int32
	Backup   bool
	Drain    bool
	Offline  bool
}

// Key identifies a backend inside a backend set: ip:port, or, for one given
// by instance alone, its instanceKey.
func (b Backend) Key() string {
	if b.IP == "" && b.TargetID != "" {
		return instanceKey(b.TargetID, b.Port)
	}
	return Key(b.IP, b.Port)
}

// instanceKey is the instance:port identity of a backend given by instance.
func instanceKey(targetID string, port int32) string {
	return "instance " + targetID + ":" + strconv.Itoa(int(port))
}

// Key is the ip:port identity of a backend, the address in canonical form:
// IPv6 text varies ("fd00:0::1", "FD00::1"), the address does not.
// It is built in one buffer: plans key every backend of a backend set, and
// at 5,000 nodes the steps of net.JoinHostPort were most of a plan's time.
func Key(ip string, port int32) string {
	addr, err := netip.ParseAddr(ip)
	if err != nil {
		return net.JoinHostPort(ip, strconv.Itoa(int(port)))
	}
	var arr [64]byte
	buf := arr[:0]
	switch {
	case addr.Is4():
		buf = append(buf, ip...) // ParseAddr takes dotted quads in canonical form only
	case addr.Is4In6():
		buf = addr.Unmap().AppendTo(buf)
	default:
		buf = append(addr.AppendTo(append(buf, '[')), ']')
	}
	return string(strconv.AppendInt(append(buf, ':'), int64(port), 10))
}

// Mode says what of this resource the backend set should end up with.
type Mode int

const (
	// Apply makes the owned backends equal to Input.Desired.
	Apply Mode = iota
	// Hold keeps what is registered: the desired state is not known for certain.
	Hold
	// Drain marks every owned backend drain, ahead of removing it.
	Drain
	// Remove takes every owned backend out (resource deleted, target moved away).
	Remove
	// Retire drains every owned backend for DrainFor, each from when its
	// drain took effect, then takes it out, as Apply does with a node that
	// departed: the spec no longer names the backend set.
	Retire
)

// leaving says whether m takes owned backends out as departed ones, drained
// for Input.DrainFor first: Apply those no longer wanted, Retire all.
func (m Mode) leaving() bool { return m == Apply || m == Retire }

// Leaves says whether m takes this resource's backends out of the backend
// set, drained first or not.
func (m Mode) Leaves() bool { return m == Drain || m == Remove || m == Retire }

// String names the mode as logs and plans show it.
func (m Mode) String() string {
	switch m {
	case Apply:
		return "apply"
	case Hold:
		return "hold"
	case Drain:
		return "drain"
	case Remove:
		return "remove"
	case Retire:
		return "retire"
	}
	return fmt.Sprintf("Mode(%d)", int(m))
}

// Input is everything one backend set's plan depends on.
type Input struct {
	Mode    Mode
	Current []Backend         // what the backend set has now
	Owned   []v1beta1.Backend // this resource's record for the backend set
	Desired []desired.Backend // for Apply
	// Protected has the keys another live resource records as its own; they
	// are dropped from this record but never removed from the backend set.
	Protected map[string]bool
	// Draining is the drain record: when each owned backend (by Key) that
	// is no longer wanted was marked drain.
	Draining map[string]time.Time
	// DrainFor is how long, in Apply, an owned backend no longer wanted
	// stays drained before it is removed; 0 removes it at once.
	DrainFor time.Duration
	// Now is the time drains are measured against.
	Now time.Time
	// NoAdds leaves wanted backends that are not registered out of the
	// plan (Withheld names them): OCI refused adding them, and what else
	// changes (removals, weights, drains) must not wait for them, but
	// that none of the wanted would be left (starves): then the backends
	// leaving stay as they are. So too when Limit withholds them.
	NoAdds bool
	// Limit, when set, is the most backends the backend set may have:
	// additions past it are left out (Withheld names them), so no write is
	// sent that OCI would refuse for its limit.
	Limit int
	// PodBackends are the desired backends, by desired.Backend.Key, that
	// only Pod targets want (desired.BackendSet.PodBackends): one already
	// registered by another hand is left foreign, not adopted.
	PodBackends map[string]bool
	// Drained says this resource's backends were marked drain already
	// (its deletion's drain period is under way or over): in Drain and
	// Remove, an owned backend no longer drained was taken back into
	// service by another writer, and is dropped from the record, neither
	// drained again nor removed.
	Drained bool
}

// Plan is the outcome for one backend set.
type Plan struct {
	// Backends is the whole list to write; meaningful only when Changed.
	Backends []Backend
	// Owned is the record once Backends is in place.
	Owned []v1beta1.Backend
	// Draining is the drain record once Backends is in place.
	Draining []v1beta1.DrainingBackend
	// Added, Removed and Updated name the keys that change (for events).
	Added, Removed, Updated []string
	// DrainStarted names the owned backends no longer wanted whose drain
	// starts, DrainEnded those removed because their drain period is over,
	// and DrainCalledOff those wanted again before it was.
	DrainStarted, DrainEnded, DrainCalledOff []string
	// Withheld names the wanted backends NoAdds or Limit left out.
	Withheld []string
	// InstanceTaken names the wanted backends left out because another
	// writer's backend has their instance and port: OCI takes an
	// instance once per port in a backend set.
	InstanceTaken []string
	// Readdressed names this resource's backends replaced, in the same
	// write, by their instance's backend at its new address.
	Readdressed []string
	// DrainsUntil is, in Apply, when the first drain in Draining is over;
	// zero for none.
	DrainsUntil time.Time
}

// Changed reports whether the backend set must be written.
func (p *Plan) Changed() bool {
	return len(p.Added)+len(p.Removed)+len(p.Updated) > 0
}

// Compute plans one backend set: the fate of each backend it has
// (fate), then the wanted ones it lacks, as far as OCI's limits let them
// in (add).
func Compute(in Input) Plan {
	w := in.work()
	p := in.plan(w, false)
	if in.Mode == Apply && len(p.Withheld) > 0 && starves(w.currentKeys, w.want) {
		p = in.plan(w, true)
	}
	return p
}

// worked is what Compute works out of Input before planning: the current
// backends' keys, the owned and wanted backends by key, and the owned ones
// readdressed.
type worked struct {
	currentKeys []string
	owned       map[string]v1beta1.Backend
	want        map[string]desired.Backend
	readdressed map[string]bool
}

func (in *Input) work() worked {
	w := worked{currentKeys: make([]string, len(in.Current)), owned: make(map[string]v1beta1.Backend, len(in.Owned)),
		want: make(map[string]desired.Backend, len(in.Desired)), readdressed: map[string]bool{}}
	for _, b := range in.Owned {
		w.owned[Key(b.IP, b.Port)] = b
	}
	if in.Mode == Apply {
		for _, b := range in.Desired {
			w.want[Key(b.IP, b.Port)] = b
		}
	}
	// A node whose instance is registered by this resource at an address
	// it no longer has (the instance's address changed): OCI takes the
	// instance once per port, so its backend at the new address replaces
	// the old one in the same write, rather than waiting for it to drain
	// (by then the old address is no longer the instance's anyway).
	wantedInstances := map[string]bool{}
	for _, d := range w.want {
		if d.TargetID != "" {
			wantedInstances[instanceKey(d.TargetID, d.Port)] = true
		}
	}
	for i, cur := range in.Current {
		k := cur.Key()
		w.currentKeys[i] = k
		_, mine := w.owned[k]
		if _, wanted := w.want[k]; mine && !wanted && !in.Protected[k] && cur.TargetID != "" && wantedInstances[instanceKey(cur.TargetID, cur.Port)] {
			w.readdressed[k] = true
		}
	}
	return w
}

// plan is Compute's plan from w; with keepLeaving, this resource's
// backends that leave are kept as they are.
func (in *Input) plan(w worked, keepLeaving bool) Plan {
	var p Plan
	present := make(map[string]bool, len(in.Current))
	p.Backends = make([]Backend, 0, len(in.Current)+len(w.want))
	for i, cur := range in.Current {
		k := w.currentKeys[i]
		present[k] = true
		if b, stays := in.fate(&p, w, cur, k, keepLeaving); stays {
			p.Backends = append(p.Backends, b)
		}
	}
	in.add(&p, w.want, present)
	slices.SortFunc(p.Owned, v1beta1.CompareBackends)
	if in.Mode.leaving() {
		p.drainsUntil(in.DrainFor)
	}
	return p
}

// fate decides what becomes of cur, a backend the set has, under key k,
// recording it in p: whether it stays in the set, and as what. The
// reasons this resource's own backends leave, and how long each is
// drained first, are Policy's.
func (in *Input) fate(p *Plan, w worked, cur Backend, k string, keepLeaving bool) (Backend, bool) {
	_, mine := w.owned[k]
	since, draining := in.Draining[k]
	switch d, wanted := w.want[k]; {
	case wanted && !mine && in.PodBackends[d.Key()]:
		// a pod's address someone else registered: an EndpointSlice,
		// which whoever may write one writes, does not make it ours
	case wanted: // adopt when foreign, make serving when needed; a backend OCI took by address stays so
		// Wanted means serving: a drain or offline mark (this resource's,
		// or one a deleted resource left on its way out) is undone.
		if cur.Weight != d.Weight || cur.Drain || cur.Offline {
			cur.Weight, cur.Drain, cur.Offline = d.Weight, false, false
			p.Updated = append(p.Updated, k)
		}
		if mine && draining {
			p.DrainCalledOff = append(p.DrainCalledOff, k)
		}
		p.Owned = append(p.Owned, v1beta1.Backend{IP: cur.IP, Port: cur.Port, Weight: cur.Weight})
	case !mine:
		// foreign: untouched
	case in.Protected[k]:
		// handed over to another live resource: untouched and forgotten
	case (in.Mode == Drain || in.Mode == Remove) && in.Drained && !cur.Drain,
		in.Mode.leaving() && draining && !cur.Drain:
		// undrained by another writer since this resource drained it:
		// wanted elsewhere, untouched and forgotten
	case in.Mode == Hold, keepLeaving:
		p.keep(cur, since, draining)
	case w.readdressed[k]: // Policy's Readdressed
		p.Readdressed = append(p.Readdressed, k)
		p.Removed = append(p.Removed, k)
		return cur, false
	case in.Mode == Drain:
		p.markDrain(&cur, k)
		p.keep(cur, since, draining)
	case in.Mode.leaving() && in.DrainFor > 0 && !draining:
		p.markDrain(&cur, k)
		p.DrainStarted = append(p.DrainStarted, k)
		p.keep(cur, in.Now, true)
	case in.Mode.leaving() && in.DrainFor > 0 && in.Now.Before(since.Add(in.DrainFor)):
		p.keep(cur, since, true)
	default: // Apply or Retire without a drain period, or past it, or Remove
		if in.Mode.leaving() && draining {
			p.DrainEnded = append(p.DrainEnded, k)
		}
		p.Removed = append(p.Removed, k)
		return cur, false
	}
	return cur, true
}

// markDrain marks b, under key k, drain, unless it is already.
func (p *Plan) markDrain(b *Backend, k string) {
	if !b.Drain {
		b.Drain = true
		p.Updated = append(p.Updated, k)
	}
}

// add adds to p the wanted backends not present, as far as OCI lets them
// in. A node registered by instance alone, by someone else or long ago,
// is there already: another backend of that instance and port would be a
// duplicate OCI refuses. One registered by another writer at another
// address has the instance: reported, not added. NoAdds and Limit
// withhold the rest.
func (in *Input) add(p *Plan, want map[string]desired.Backend, present map[string]bool) {
	instances := map[string]string{} // instance:port -> the address it is registered at
	for _, b := range p.Backends {
		if b.TargetID != "" {
			instances[instanceKey(b.TargetID, b.Port)] = b.IP
		}
	}
	added := make([]desired.Backend, 0, len(want))
	for k, d := range want {
		if present[k] {
			continue
		}
		at, registered := "", false
		if d.TargetID != "" {
			at, registered = instances[instanceKey(d.TargetID, d.Port)]
		}
		switch {
		case !registered:
			added = append(added, d)
		case at != "":
			p.InstanceTaken = append(p.InstanceTaken, k)
		}
	}
	slices.Sort(p.InstanceTaken)
	slices.SortFunc(added, desired.CompareBackends)
	fit := len(added)
	if in.NoAdds {
		fit = 0
	} else if room := in.Limit - len(p.Backends); in.Limit > 0 && room < fit {
		fit = max(room, 0)
	}
	for _, d := range added[fit:] {
		p.Withheld = append(p.Withheld, Key(d.IP, d.Port))
	}
	for _, d := range added[:fit] {
		p.Backends = append(p.Backends, Backend{IP: d.IP, TargetID: d.TargetID, Port: d.Port, Weight: d.Weight})
		p.Owned = append(p.Owned, v1beta1.Backend{IP: d.IP, Port: d.Port, Weight: d.Weight})
		p.Added = append(p.Added, Key(d.IP, d.Port))
	}
}

// starves reports whether a write without additions would leave none of
// the wanted backends in the set (current, by key): every one is yet to be
// added. Then this resource's backends that leave are kept as they are,
// serving or draining, until a replacement is in: removing them while OCI
// refuses the additions (a load balancer's room taken by other writers)
// would empty the set of this resource's backends for as long.
func starves(current []string, want map[string]desired.Backend) bool {
	if len(want) == 0 {
		return false
	}
	for _, k := range current {
		if _, ok := want[k]; ok {
			return false
		}
	}
	return true
}

// DrainTookEffect counts the drains p starts from at, when the write that
// marks them drained ended, not from when they were planned: a work
// request can take much of a short drain period.
func (p *Plan) DrainTookEffect(at time.Time, drainFor time.Duration) {
	if len(p.DrainStarted) == 0 {
		return
	}
	for i, b := range p.Draining {
		if slices.Contains(p.DrainStarted, Key(b.IP, b.Port)) && b.Since.Time.Before(at) {
			p.Draining[i].Since = metav1.NewTime(at)
		}
	}
	p.drainsUntil(drainFor)
}

// drainsUntil sets DrainsUntil to when the first drain in the record ends.
func (p *Plan) drainsUntil(drainFor time.Duration) {
	p.DrainsUntil = time.Time{}
	for _, b := range p.Draining {
		if until := b.Since.Add(drainFor); p.DrainsUntil.IsZero() || until.Before(p.DrainsUntil) {
			p.DrainsUntil = until
		}
	}
}

// keep keeps an owned backend in the record, and in the drain record since
// when it was marked drain, if it is draining.
func (p *Plan) keep(b Backend, since time.Time, draining bool) {
	p.Owned = append(p.Owned, v1beta1.Backend{IP: b.IP, Port: b.Port, Weight: b.Weight})
	if draining {
		p.Draining = append(p.Draining, v1beta1.DrainingBackend{IP: b.IP, Port: b.Port, Since: metav1.NewTime(since)})
	}
}

// Intent is the record to store before writing p: what is owned now plus
// what p adds, so a crash between the write and the final record can never
// leave a registered backend that no record claims.
func Intent(owned []v1beta1.Backend, p *Plan) []v1beta1.Backend {
	out := slices.Clone(owned)
	seen := make(map[string]bool, len(owned))
	for _, b := range owned {
		seen[Key(b.IP, b.Port)] = true
	}
	for _, b := range p.Owned {
		if !seen[Key(b.IP, b.Port)] {
			out = append(out, b)
		}
	}
	slices.SortFunc(out, v1beta1.CompareBackends)
	return out
}
