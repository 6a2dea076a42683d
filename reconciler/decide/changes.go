package decide

import (
	"context"
	"fmt"

	"github.com/peppy-ratio/lbregistrar/api/v1beta1"
	"github.com/peppy-ratio/lbregistrar/reconciler/backendset"
	"github.com/peppy-ratio/lbregistrar/reconciler/oci"
	"github.com/peppy-ratio/lbregistrar/reconciler/plan"
	"github.com/peppy-ratio/lbregistrar/reconciler/preview"
	"github.com/peppy-ratio/lbregistrar/reconciler/status"
)

// Changes plans each job's backend set of lb over what OCI has registered, as
// a sync does, and writes nothing. What a sync would report as failed goes
// into out as the sync puts it.
func Changes(ctx context.Context, read backendset.Reader, obj *v1beta1.LBRegistrar, lb string, jobs []Job, out *status.Outcome) []preview.BackendSetChange {
	changes := make([]preview.BackendSetChange, 0, len(jobs))
	for _, j := range jobs {
		c := preview.BackendSetChange{LBRegistrar: obj.Name, LoadBalancerID: lb, BackendSet: j.Name, Mode: j.Mode.String()}
		bs, err := j.Read, error(nil)
		if bs == nil && j.Err == nil { // not read yet, or its read failed: read again for the error
			bs, err = read.GetBackendSet(ctx, lb, j.Name)
		}
		switch {
		case j.Err != nil: // out has it already
			c.Error = j.Err.Error()
		case oci.IsNotFound(err):
			c.NotFound = true
			if !j.Mode.Leaves() { // nothing left to remove counts as done
				out.Missing(MissingBackendSet(j.Name, lb, err), err)
			}
		case err != nil:
			c.Error = err.Error()
			out.Fail(j.Name, err)
		default:
			p := plan.Compute(j.Input(obj, bs.Backends, bs.BackendLimit(0)))
			c = preview.Describe(c, bs.Backends, &p, j.DrainFor, bs.BackendLimit(0))
		}
		changes = append(changes, c)
	}
	return changes
}

// MissingBackendSet says that a backend set to register in does not
// exist, or, when its load balancer answered 404 too (err), that the load
// balancer does not exist or the identity may not read it: OCI answers
// 404 NotAuthorizedOrNotFound to both, so the fix is one of two.
func MissingBackendSet(name, lb string, err error) string {
	if oci.IsLoadBalancerMissing(err) {
		resourceType := "load-balancers"
		if oci.IsNetworkLoadBalancer(lb) {
			resourceType = "network-load-balancers"
		}
		return fmt.Sprintf("load balancer %s not found, or the identity may not read it (OCI answers 404 NotAuthorizedOrNotFound to both): check spec.loadBalancerId, and that an IAM policy lets the identity use %s in the load balancer's compartment",
			lb, resourceType)
	}
	return fmt.Sprintf("backend set %q not found in load balancer %s", name, lb)
}
