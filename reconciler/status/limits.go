package status

import (
	"fmt"
	"strings"

	"github.com/peppy-ratio/lbregistrar/api/v1beta1"
	"github.com/peppy-ratio/lbregistrar/reconciler/desired"
)

// NearLimit says why a backend set whose write leaves it wanting n
// backends (those it has and those OCI refused) is near or past its
// limit, so it is raised before additions are refused; nil when it is
// not. A small limit (a non-preemptive pair's 2) is the set's purpose, so
// it is reported only past it.
func NearLimit(name string, n, limit int) *desired.Issue {
	switch {
	case n > limit:
		return &desired.Issue{Reason: v1beta1.ReasonBackendLimit, Message: fmt.Sprintf("backend set %q is wanted to have %d backends; OCI lets it have %d", name, n, limit)}
	case limit >= 10 && n*10 >= limit*9:
		return &desired.Issue{Reason: v1beta1.ReasonBackendLimit, Message: fmt.Sprintf("backend set %q has %d of the %d backends OCI lets it have", name, n, limit)}
	}
	return nil
}

// InstanceRegistered says which wanted backends of backend set name are
// left out because their instances are registered by another writer at
// other addresses; nil for none.
func InstanceRegistered(name string, wanted []string) *desired.Issue {
	if len(wanted) == 0 {
		return nil
	}
	return &desired.Issue{Reason: v1beta1.ReasonInstanceRegistered, Message: fmt.Sprintf(
		"backend set %q: %s not added: another writer registered the same instance and port at another address, and OCI takes an instance once per port; remove that backend to let it in",
		name, strings.Join(wanted, ", "))}
}
