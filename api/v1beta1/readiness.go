package v1beta1

// Readiness gates: a pod of a Service an LBRegistrar registers is Ready
// only once the load balancer has it (docs/operations.md, "Readiness
// gates"), so a rolling update does not outrun the load balancer.
const (
	// ReadinessGate is the condition type of the readiness gate the
	// admission webhook adds to such pods, in namespaces that opt in; the
	// controller sets it True once each backend set registering the pod
	// has its backend (the pod's, or its node's) serving and OCI reports
	// it OK, or, for a node whose health check needs this very pod ready,
	// once it has the node serving.
	ReadinessGate = "nodes.peppy-ratio.dev/load-balancer-ready"
	// ReadinessGateLabel marks the pods given the gate, so the controller
	// watches those pods only.
	ReadinessGateLabel = "nodes.peppy-ratio.dev/readiness-gate"
	// ReadinessGatesNamespaceLabel set to ReadinessGatesEnabled on a
	// namespace opts its pods in; the webhook is called for no other.
	ReadinessGatesNamespaceLabel = "nodes.peppy-ratio.dev/readiness-gates"
	ReadinessGatesEnabled        = "enabled"
	// ReleaseGatesAnnotation set to "true" on an LBRegistrar lets every
	// pod whose gate waits for it through at once, whatever the load
	// balancer has: the way out, for whoever may change the resource,
	// when it cannot write (a Conflict, an identity it may not use, OCI
	// refusing) and the rollouts it keeps waiting must go on.
	ReleaseGatesAnnotation = "nodes.peppy-ratio.dev/release-readiness-gates"
)
