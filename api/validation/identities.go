package validation

import (
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/peppy-ratio/lbregistrar/api/v1alpha1"
	"github.com/peppy-ratio/lbregistrar/api/v1beta1"
)

// ServiceAccountRef is the ServiceAccount a workload identity signs in as,
// with the field that names it.
type ServiceAccountRef struct {
	Field     *field.Path
	Namespace string
	Name      string
}

// ServiceAccountReference is the ServiceAccount spec's workload identity
// names; nil when it names none.
func ServiceAccountReference(spec *v1beta1.LBRegistrarSpec) *ServiceAccountRef {
	if w := spec.WorkloadIdentity; w != nil && w.ServiceAccount != nil {
		return &ServiceAccountRef{specPath.Child("workloadIdentity", "serviceAccount"), w.ServiceAccount.Namespace, w.ServiceAccount.Name}
	}
	return nil
}

// ControllerIdentity is the field of spec's identity when that identity is
// the controller's own, which every such resource shares: its node's
// instance principal, its service account's workload identity, or a
// workload identity naming the ServiceAccount the controller runs as
// (controller, its username; none when empty), which is the same identity
// named explicitly. Nil for any other identity.
func ControllerIdentity(spec *v1beta1.LBRegistrarSpec, controller string) *field.Path {
	w := spec.WorkloadIdentity
	switch {
	case spec.InstancePrincipal != nil:
		return specPath.Child("instancePrincipal")
	case w == nil:
		return nil
	case w.ServiceAccount == nil:
		return specPath.Child("workloadIdentity")
	}
	if own, ok := ServiceAccountOf(controller); ok && own.Namespace == w.ServiceAccount.Namespace && own.Name == w.ServiceAccount.Name {
		return specPath.Child("workloadIdentity", "serviceAccount")
	}
	return nil
}

// ServiceAccountOf is the ServiceAccount user is, as the API server names
// one (system:serviceaccount:<namespace>:<name>), if it is one.
func ServiceAccountOf(user string) (types.NamespacedName, bool) {
	rest, ok := strings.CutPrefix(user, "system:serviceaccount:")
	namespace, name, ok2 := strings.Cut(rest, ":")
	if !ok || !ok2 || namespace == "" || name == "" || strings.Contains(name, ":") {
		return types.NamespacedName{}, false
	}
	return types.NamespacedName{Namespace: namespace, Name: name}, true
}

// UncheckedIdentity is the field of the identity spec signs in with when
// annotations mark it as one no admission check may have seen
// (v1alpha1.UncheckedIdentityAnnotation, which conversion writes): the
// controller does not sign in with it, and a write that removes the mark
// is checked as one that names it. Nil for an API key, and for an identity
// the mark does not name (one an admitted write put there since).
func UncheckedIdentity(annotations map[string]string, spec *v1beta1.LBRegistrarSpec) *field.Path {
	if spec.APIKey != nil || annotations[v1alpha1.UncheckedIdentityAnnotation] != spec.Identity() {
		return nil
	}
	if sa := ServiceAccountReference(spec); sa != nil {
		return sa.Field
	}
	return ControllerIdentity(spec, "")
}

// ServiceReference is a Service that targets of a spec name, and the field
// of the first that names it.
type ServiceReference struct {
	Field           *field.Path
	Namespace, Name string
}

// ServiceReferences are the Services spec's targets name, each once, in
// order of first use, on v1beta1 fields.
func ServiceReferences(spec *v1beta1.LBRegistrarSpec) []ServiceReference {
	return serviceReferences(spec, hubPaths(specPath))
}

// ServiceReferences are the Services the object's stored spec names, on
// the fields that wrote them.
func (a *Alpha) ServiceReferences() []ServiceReference {
	return serviceReferences(&a.Stored, a.paths())
}

func serviceReferences(spec *v1beta1.LBRegistrarSpec, paths specPaths) []ServiceReference {
	var refs []ServiceReference
	for i := range spec.Services {
		t := &spec.Services[i]
		if t.Name == "" || slices.ContainsFunc(refs, func(r ServiceReference) bool { return r.Namespace == t.Namespace && r.Name == t.Name }) {
			continue
		}
		refs = append(refs, ServiceReference{paths.target(i).name, t.Namespace, t.Name})
	}
	return refs
}
