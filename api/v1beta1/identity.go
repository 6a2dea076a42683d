package v1beta1

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
