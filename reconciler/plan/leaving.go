package plan

// Leaving is why a backend this resource registered stops being wanted.
type Leaving int

const (
	// NodeDeparted means its node was deleted, is no longer eligible, has no
	// serving endpoint of the Service, or changed its address.
	NodeDeparted Leaving = iota
	// Readdressed means its node's address changed in a source-preserving NLB
	// set, the instance the same (Plan.Readdressed).
	Readdressed
	// TargetRemoved means the spec no longer names its backend set (a target
	// removed from spec.services, or its backendSetName changed).
	TargetRemoved
	// ResourceDeleted means the resource was deleted, and its backends are not
	// kept.
	ResourceDeleted
	// LoadBalancerChanged means spec.loadBalancerId names another load balancer.
	LoadBalancerChanged
	// DeletedOrphaning means the resource was deleted and orphans its backends
	// (deletionPolicy Orphan, suspended, the CRD being deleted).
	DeletedOrphaning
)

// Fate is what becomes of a backend leaving.
type Fate int

const (
	// DrainedThenRemoved means marked drain, kept for a drain period from when
	// the drain took effect, then removed.
	DrainedThenRemoved Fate = iota
	// Replaced means removed in the write that adds its instance's backend at
	// the new address (OCI takes an instance once per port).
	Replaced
	// Orphaned means left registered, and no longer recorded.
	Orphaned
)

// Period is which drain period a leaving backend is drained for.
type Period int

const (
	// NoPeriod means the backend is not drained.
	NoPeriod Period = iota
	// NodeDrainPeriod means serve's --node-drain-period, for a change inside the
	// resource (long enough for an idle keep-alive connection to close).
	NodeDrainPeriod
	// DrainPeriod means serve's --drain-period, for the resource leaving a load
	// balancer.
	DrainPeriod
)

// Departure is one row of the leaving policy.
type Departure struct {
	Why Leaving
	// Because is the reason as docs/reconciler.md's table "When a backend
	// leaves" words it: the table and these rows are kept equal.
	Because string
	Fate    Fate
	For     Period
}

// Policy is the leaving policy: for each reason a backend of this
// resource stops being wanted, what becomes of it. decide.Options.DrainFor
// answers from it, and Compute carries it out (fate).
var Policy = []Departure{
	{NodeDeparted, "its node departs: deleted, no longer eligible (taint, label, selector), its endpoints gone (with `externalTrafficPolicy: Local`, its ready ones), or its address changed", DrainedThenRemoved, NodeDrainPeriod},
	{Readdressed, "its node's address changed, in a source-preserving NLB set, the instance the same", Replaced, NoPeriod},
	{TargetRemoved, "its target left `spec.services`, or the target's `backendSetName` changed (the old set)", DrainedThenRemoved, NodeDrainPeriod},
	{ResourceDeleted, "the resource was deleted", DrainedThenRemoved, DrainPeriod},
	{LoadBalancerChanged, "`loadBalancerId` changed (the old load balancer)", DrainedThenRemoved, DrainPeriod},
	{DeletedOrphaning, "the resource was deleted with `deletionPolicy: Orphan`, while suspended, or with the CRD", Orphaned, NoPeriod},
}

// PolicyFor is Policy's row for why.
func PolicyFor(why Leaving) Departure {
	for _, d := range Policy {
		if d.Why == why {
			return d
		}
	}
	panic("plan: no leaving policy for a reason")
}
