package validation

import (
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/peppy-ratio/lbregistrar/api/v1beta1"
)

// ServiceAccountRef is the ServiceAccount a workload identity signs in as,
// with the field that names it.
type ServiceAccountRef struct {
	Field     *field.Path
	Namespace string
	Name      string
}

// ServiceAccountReference says whose identity spec signs in with, besides
// API keys: the ServiceAccount it names, or (asController) the field of an
// identity that is the controller's own, its service account's workload
// identity or its node's instance principal; neither for an API key.
func ServiceAccountReference(spec *v1beta1.LBRegistrarSpec) (sa *ServiceAccountRef, asController *field.Path) {
	switch w := spec.WorkloadIdentity; {
	case w != nil && w.ServiceAccount != nil:
		return &ServiceAccountRef{specPath.Child("workloadIdentity", "serviceAccount"), w.ServiceAccount.Namespace, w.ServiceAccount.Name}, nil
	case w != nil:
		return nil, specPath.Child("workloadIdentity")
	case spec.InstancePrincipal != nil:
		return nil, specPath.Child("instancePrincipal")
	}
	return nil, nil
}
