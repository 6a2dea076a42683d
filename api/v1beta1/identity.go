package v1beta1

import "fmt"

// Region is the region of the load balancer, as the identity that signs in
// names it; empty when the spec names no identity.
func (s *LBRegistrarSpec) Region() string {
	switch {
	case s.APIKey != nil:
		return s.APIKey.Region
	case s.WorkloadIdentity != nil:
		return s.WorkloadIdentity.Region
	case s.InstancePrincipal != nil:
		return s.InstancePrincipal.Region
	}
	return ""
}

// Identity names the identity spec signs in to OCI with, nothing secret.
func (s *LBRegistrarSpec) Identity() string {
	switch {
	case s.APIKey != nil:
		return fmt.Sprintf("API key of user %s fingerprint %s", s.APIKey.User, s.APIKey.Fingerprint)
	case s.WorkloadIdentity != nil && s.WorkloadIdentity.ServiceAccount != nil:
		sa := s.WorkloadIdentity.ServiceAccount
		return fmt.Sprintf("workload identity of service account %s/%s", sa.Namespace, sa.Name)
	case s.WorkloadIdentity != nil:
		return "workload identity of the controller's service account"
	case s.InstancePrincipal != nil:
		return "instance principal"
	}
	return "no identity"
}
