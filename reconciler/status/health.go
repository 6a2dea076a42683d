package status

import (
	"fmt"
	"slices"
	"strings"

	"github.com/peppy-ratio/lbregistrar/api/v1beta1"
	"github.com/peppy-ratio/lbregistrar/reconciler/oci"
	"github.com/peppy-ratio/lbregistrar/reconciler/plan"
)

// SetHealth records in obj's ownership records the health read of each
// backend set, and adds the backend sets with unhealthy own backends to
// out; records without a read are left without health, which this
// reconcile did not learn.
func SetHealth(obj *v1beta1.LBRegistrar, read map[string]*oci.BackendSetHealth, out *Outcome) {
	for i := range obj.Status.BackendSets {
		rec := &obj.Status.BackendSets[i]
		rec.Health = nil
		if h := read[rec.Name]; h != nil {
			rec.Health = summarizeHealth(rec.Owned(), h)
			if len(rec.Health.Unhealthy) > 0 {
				out.Unhealthy = append(out.Unhealthy, unhealthyMessage(rec.Name, rec.Health))
			}
		}
	}
	obj.Status.Healthy = healthyCount(obj.Status.BackendSets)
}

// KeepHealth adds to out the unhealthy own backends that the health
// recorded before names, when this reconcile does not read it again.
func KeepHealth(obj *v1beta1.LBRegistrar, out *Outcome) {
	for _, rec := range obj.Status.BackendSets {
		if rec.Health != nil && len(rec.Health.Unhealthy) > 0 {
			out.Unhealthy = append(out.Unhealthy, unhealthyMessage(rec.Name, rec.Health))
		}
	}
}

// summarizeHealth counts the owned backends by the state OCI reports each
// in. OCI lists every backend that is not OK, so an owned one it does not
// list is OK, unless it lists none and is not OK overall (Unlisted); names
// in OCI's lists that are not owned are someone else's and not counted.
func summarizeHealth(owned []v1beta1.Backend, h *oci.BackendSetHealth) *v1beta1.BackendSetHealth {
	state := h.NotOK()
	unlisted := h.Unlisted()
	out := &v1beta1.BackendSetHealth{Status: h.Status}
	var critical, warning []string
	for _, b := range owned {
		key := plan.Key(b.IP, b.Port)
		s, listed := state[key]
		if !listed {
			s = unlisted
		}
		switch s {
		case "WARNING":
			out.Warning++
			warning = append(warning, key)
		case "CRITICAL":
			out.Critical++
			critical = append(critical, key)
		case "UNKNOWN":
			out.Unknown++
		default:
			out.OK++
		}
	}
	slices.Sort(critical)
	slices.Sort(warning)
	if named := append(critical, warning...); len(named) > 0 {
		out.Unhealthy = named[:min(len(named), v1beta1.MaxUnhealthyNamed)]
	}
	return out
}

// unhealthyMessage names a backend set's unhealthy own backends for Degraded.
func unhealthyMessage(name string, h *v1beta1.BackendSetHealth) string {
	msg := fmt.Sprintf("backend set %q: OCI reports %d of this resource's backends unhealthy (%d critical, %d warning): %s",
		name, h.Critical+h.Warning, h.Critical, h.Warning, strings.Join(h.Unhealthy, ", "))
	if more := int(h.Critical+h.Warning) - len(h.Unhealthy); more > 0 {
		msg += fmt.Sprintf(" and %d more", more)
	}
	return msg
}

// healthyCount is status.healthy: OK own backends of all those whose
// health was read, "" when none was.
func healthyCount(sets []v1beta1.BackendSetStatus) string {
	var ok, total int32
	read := false
	for _, s := range sets {
		if h := s.Health; h != nil {
			read = true
			ok += h.OK
			total += h.OK + h.Warning + h.Critical + h.Unknown
		}
	}
	if !read {
		return ""
	}
	return fmt.Sprintf("%d/%d", ok, total)
}
