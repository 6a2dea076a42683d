package decide

import (
	"slices"
	"strings"

	"github.com/peppy-ratio/lbregistrar/api/v1beta1"
	"github.com/peppy-ratio/lbregistrar/api/validation"
	"github.com/peppy-ratio/lbregistrar/reconciler/ownership"
	"github.com/peppy-ratio/lbregistrar/reconciler/plan"
	"github.com/peppy-ratio/lbregistrar/reconciler/status"
)

// Claimants lists the resources, other than the one decided for, that
// claim a backend set of a load balancer, deleting ones included.
type Claimants func(loadBalancerID, backendSet string) ([]v1beta1.LBRegistrar, error)

// Vouched is c with the ownership records that do not verify under key
// dropped from what it returns: a record no one can vouch for protects
// nothing, as it owns nothing.
func (c Claimants) Vouched(key []byte) Claimants {
	return func(lb, name string) ([]v1beta1.LBRegistrar, error) {
		found, err := c(lb, name)
		for i := range found {
			if !ownership.Vouched(key, &found[i]) {
				ownership.Drop(&found[i])
			}
		}
		return found, err
	}
}

// Among finds the claimants in resources read all at once, where
// no index is kept (lbregistrar plan); name is the resource decided for.
func Among(all []v1beta1.LBRegistrar, name string) Claimants {
	return func(lb, set string) ([]v1beta1.LBRegistrar, error) {
		key := validation.ClaimKey(lb, set)
		var found []v1beta1.LBRegistrar
		for i := range all {
			if all[i].Name != name && slices.Contains(validation.ClaimKeys(&all[i].Spec), key) {
				found = append(found, all[i])
			}
		}
		return found, nil
	}
}

// Lost returns the backend sets of obj that another live resource is the holder of.
func Lost(obj *v1beta1.LBRegistrar, claimants Claimants) (map[string]string, error) {
	lost := map[string]string{}
	for i := range obj.Spec.Services {
		name := obj.Spec.Services[i].BackendSetName
		if _, seen := lost[name]; seen {
			continue
		}
		others, err := claimants(obj.Spec.LoadBalancerID, name)
		if err != nil {
			return nil, err
		}
		live := []*v1beta1.LBRegistrar{obj}
		for j := range others {
			if others[j].DeletionTimestamp.IsZero() {
				live = append(live, &others[j])
			}
		}
		if holder := holderOf(live); holder != obj {
			lost[name] = holder.Name
		}
	}
	return lost, nil
}

// holderOf picks, among resources claiming one backend set, its holder.
// validation.Precedes decides between two; it need not be transitive (a
// replacement precedes what it replaces, an older resource precedes a
// newer one), so the candidates are taken oldest first and each replaces
// the current holder when it precedes it. Every resource that sees
// the same claimants picks the same holder, so exactly one writes.
func holderOf(claimants []*v1beta1.LBRegistrar) *v1beta1.LBRegistrar {
	ordered := slices.Clone(claimants)
	slices.SortFunc(ordered, func(a, b *v1beta1.LBRegistrar) int {
		if c := a.CreationTimestamp.Compare(b.CreationTimestamp.Time); c != 0 {
			return c
		}
		return strings.Compare(a.Name, b.Name)
	})
	holder := ordered[0]
	for _, c := range ordered[1:] {
		if validation.Precedes(c, holder) {
			holder = c
		}
	}
	return holder
}

// protect sets each job's Protected: the backends the live claimants of its
// backend set record there. A job whose claimants cannot be listed gets
// Err, which out records, and is not written.
func protect(claimants Claimants, lb string, jobs []Job, out *status.Outcome) {
	for i := range jobs {
		j := &jobs[i]
		others, err := claimants(lb, j.Name)
		if err != nil {
			j.Err = err
			out.Fail(j.Name, err)
			continue
		}
		j.Protected = map[string]bool{}
		for k := range others {
			if !others[k].DeletionTimestamp.IsZero() {
				continue
			}
			if rec := status.FindEntry(&others[k], j.Name); rec != nil {
				for _, b := range rec.Owned() {
					j.Protected[plan.Key(b.IP, b.Port)] = true
				}
			}
		}
	}
}
