// Package decide says what one reconcile of a resource should do, from the
// cluster as a reader shows it, the claims other resources make on its
// backend sets, and its backend sets as OCI has them: the desired state
// and what is wrong with it, the backend sets that belong to another resource, and
// which backend sets to bring in line in which mode, a Job each. The
// controller, serve --dry-run and lbregistrar plan decide here, so a plan
// shows what the controller will do.
//
// It reads the cluster and OCI's backend sets, and writes nothing.
package decide

import (
	"context"
	"maps"
	"net/netip"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/peppy-ratio/lbregistrar/api/v1beta1"
	"github.com/peppy-ratio/lbregistrar/reconciler/backendset"
	"github.com/peppy-ratio/lbregistrar/reconciler/desired"
	"github.com/peppy-ratio/lbregistrar/reconciler/oci"
	"github.com/peppy-ratio/lbregistrar/reconciler/plan"
	"github.com/peppy-ratio/lbregistrar/reconciler/status"
)

// Options are what deciding depends on besides the cluster and OCI.
type Options struct {
	// RequireReadyNodes registers only Ready nodes (see desired.Options).
	RequireReadyNodes bool
	// NodeDrainPeriod is how long a backend no longer wanted stays drained
	// before it is removed; 0 removes it at once.
	NodeDrainPeriod time.Duration
	// DrainPeriod is how long a resource's backends stay drained when it
	// leaves a load balancer (deleted, or moved to another) before they are
	// removed; 0 removes them at once.
	DrainPeriod time.Duration
}

// Orphans says why deleting obj orphans its backends (leaves them
// registered, no longer recorded), as obj itself asks (deletionPolicy
// Orphan, or suspended: nothing is written), or "" when they are drained
// and removed.
func Orphans(obj *v1beta1.LBRegistrar) string {
	switch {
	case obj.Spec.DeletionPolicy == v1beta1.DeletionPolicyOrphan:
		return "its deletionPolicy is Orphan"
	case obj.Spec.Suspend:
		return "it is suspended"
	}
	return ""
}

// DrainFor is how long a backend leaving for why is drained before it is
// removed, counted from when the drain took effect: the period
// plan.Policy names for it; 0 removes it at once.
func (o Options) DrainFor(why plan.Leaving) time.Duration {
	switch plan.PolicyFor(why).For {
	case plan.NodeDrainPeriod:
		return o.NodeDrainPeriod
	case plan.DrainPeriod:
		return o.DrainPeriod
	}
	return 0
}

// decide is what a reconcile of obj decides from the cluster and the
// backend sets read, given the backend sets that belong to another resource (lost):
// what the desired state is and what is wrong with it (issues), and which
// backend sets to bring in line in which mode (held ones keep what is
// registered). The controller and lbregistrar plan both decide here, so the
// plan shows what the controller will do.
func decide(obj *v1beta1.LBRegistrar, cluster desired.Cluster, lost map[string]string, read map[string]*oci.BackendSet, o Options) (status.Outcome, []Job) {
	result := desired.Compute(&obj.Spec, cluster, desired.Options{RequireReady: o.RequireReadyNodes, BackendSets: takes(read)})
	out := status.Outcome{Lost: lost, Issues: result.Issues}
	return out, registerJobs(obj, result, &out, read, o)
}

// OCI is what deciding reads of OCI: backend sets, and the private IPs of
// the instances pods run on.
type OCI interface {
	backendset.Reader
	PrivateIPs(ctx context.Context, instanceID string, want []netip.Addr) (oci.PrivateIPs, error)
}

// Assess gathers what decide needs and decides: the cluster as reader sees
// it, the backend sets obj loses to claimants, and its backend sets as OCI
// has them, with the private IPs of the nodes their pods run on where they
// take pods by private IP, read with ociClient (nil when obj's credentials
// cannot be used: nothing is read, and the desired state is decided
// without them). The controller's turn and lbregistrar plan both start
// here.
func Assess(ctx context.Context, reader client.Reader, ociClient OCI, obj *v1beta1.LBRegistrar, claimants Claimants, opts Options) (status.Outcome, []Job, error) {
	cluster, err := readView(ctx, reader, obj)
	if err != nil {
		return status.Outcome{}, nil, err
	}
	lost, err := Lost(obj, claimants)
	if err != nil {
		return status.Outcome{}, nil, err
	}
	var read map[string]*oci.BackendSet
	if ociClient != nil {
		read = backendset.ReadAll(ctx, ociClient, obj.Spec.LoadBalancerID, backendSetNames(obj, lost))
		cluster.PrivateIPs = privateIPs(ctx, ociClient, cluster, desired.PrivateIPNodes(&obj.Spec, cluster, takes(read)))
	}
	out, jobs := decide(obj, cluster, lost, read, opts)
	protect(claimants, obj.Spec.LoadBalancerID, jobs, &out)
	return out, jobs, nil
}

// Job is one backend set to bring in line within a reconcile.
type Job struct {
	Name string
	Mode plan.Mode
	Want []desired.Backend
	// Protected are the backends other live resources record there.
	Protected map[string]bool
	// Drained: see plan.Input.Drained.
	Drained bool
	// DrainFor: see plan.Input.DrainFor.
	DrainFor time.Duration
	// Read is the backend set as Assess read it; nil when it was not read,
	// or its read failed.
	Read *oci.BackendSet
	// Stands and Held are the desired state's (desired.BackendSet), for
	// the readiness gates.
	Stands desired.Stands
	Held   *desired.Issue
	// PodBackends: see plan.Input.PodBackends.
	PodBackends map[string]bool
	// Err says why its inputs could not be read; it is not written.
	Err error
}

// Input is the plan input of the job's backend set, which has current and
// which OCI lets have at most limit backends.
func (j *Job) Input(obj *v1beta1.LBRegistrar, current []plan.Backend, limit int) plan.Input {
	var owned []v1beta1.Backend
	draining := map[string]time.Time{}
	if rec := status.FindEntry(obj, j.Name); rec != nil { // read only: a resource with no record has none
		owned = rec.Owned()
		for _, b := range rec.DrainingBackends() {
			draining[plan.Key(b.IP, b.Port)] = b.Since.Time
		}
	}
	return plan.Input{Mode: j.Mode, Current: current, Owned: owned, Desired: j.Want, Protected: j.Protected, Drained: j.Drained,
		Draining: draining, DrainFor: j.DrainFor, Now: time.Now(), Limit: limit, PodBackends: j.PodBackends}
}

// backendSetNames are the backend sets a reconcile of obj may write: those
// its spec names, but for the ones that belong to another resource, and those it
// still has a record of.
func backendSetNames(obj *v1beta1.LBRegistrar, lost map[string]string) []string {
	var names []string
	for _, t := range obj.Spec.Services {
		if _, kept := lost[t.BackendSetName]; !kept {
			names = append(names, t.BackendSetName)
		}
	}
	for _, rec := range obj.Status.BackendSets {
		names = append(names, rec.Name)
	}
	slices.Sort(names)
	return slices.Compact(names)
}

// privateIPs reads the private IPs of the instances of nodes, each asked
// for the addresses it should list; a node without an instance OCID is not
// read (its pods have none to find), and one whose read fails is Unread.
func privateIPs(ctx context.Context, ociClient OCI, cluster desired.Cluster, nodes map[string][]netip.Addr) desired.PrivateIPs {
	var out desired.PrivateIPs
	for _, name := range slices.Sorted(maps.Keys(nodes)) {
		node := cluster.NodesByName[name]
		if node == nil || desired.InstanceID(node) == "" {
			continue
		}
		instance := desired.InstanceID(node)
		ips, err := ociClient.PrivateIPs(ctx, instance, nodes[name])
		if err != nil {
			if out.Unread == nil {
				out.Unread = map[string]string{}
			}
			out.Unread[name] = err.Error()
			continue
		}
		if out.OCIDs == nil {
			out.OCIDs = map[netip.Addr]string{}
		}
		maps.Copy(out.OCIDs, ips)
	}
	return out
}

// takes is what each backend set read takes of a node: addresses of its
// NLB ipVersion (a classic one, which has none, takes IPv4), and the
// instance OCID too where it preserves the client's source address.
func takes(read map[string]*oci.BackendSet) map[string]desired.Takes {
	out := make(map[string]desired.Takes, len(read))
	for name, bs := range read {
		t := desired.Takes{Instance: bs.PreservesSource, HealthPort: bs.HealthCheckPort()}
		if bs.ProtocolsUnread != nil {
			t.ProtocolsUnread = bs.ProtocolsUnread.Error()
		}
		for _, p := range bs.Protocols {
			t.Protocols = append(t.Protocols, corev1.Protocol(p))
		}
		switch bs.IPVersion {
		case "IPV4":
			t.Family = desired.IPv4
		case "IPV6":
			t.Family = desired.IPv6
		}
		out[name] = t
	}
	return out
}

// Removals are the jobs that take obj's recorded backends out of lb in
// mode: Drain or Remove, as deletion does, or Retire, drained for drainFor
// and then removed, as a move to another load balancer does.
func Removals(obj *v1beta1.LBRegistrar, lb string, mode plan.Mode, drainFor time.Duration, claimants Claimants, out *status.Outcome) []Job {
	var jobs []Job
	for _, rec := range obj.Status.BackendSets {
		jobs = append(jobs, Job{Name: rec.Name, Mode: mode, Drained: rec.Drained, DrainFor: drainFor})
	}
	protect(claimants, lb, jobs, out)
	return jobs
}

// registerJobs are the backend sets a reconcile brings in line: every one
// the desired state names that belong to no other resource (those whose desired
// state is uncertain keep what is registered, and out says so), and every
// recorded one the spec no longer names, whose owned backends are drained
// (DrainFor), as those of a departed node are, and then go. read are the
// backend sets already read.
func registerJobs(obj *v1beta1.LBRegistrar, result desired.Result, out *status.Outcome, read map[string]*oci.BackendSet, o Options) []Job {
	var jobs []Job
	inSpec := map[string]bool{}
	for _, bs := range result.BackendSets {
		inSpec[bs.Name] = true
		if _, ok := out.Lost[bs.Name]; ok {
			continue
		}
		mode := plan.Apply
		if bs.Held != nil {
			mode = plan.Hold
			out.Held = append(out.Held, bs.Name)
		}
		jobs = append(jobs, Job{Name: bs.Name, Mode: mode, Want: bs.Backends, DrainFor: o.DrainFor(plan.NodeDeparted), Read: read[bs.Name], Stands: bs.Stands, Held: bs.Held,
			PodBackends: bs.PodBackends})
	}
	for _, rec := range obj.Status.BackendSets {
		if !inSpec[rec.Name] {
			jobs = append(jobs, Job{Name: rec.Name, Mode: plan.Retire, DrainFor: o.DrainFor(plan.TargetRemoved), Read: read[rec.Name]})
		}
	}
	return jobs
}
