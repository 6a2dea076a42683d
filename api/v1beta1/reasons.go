package v1beta1

// The reasons of the conditions and Events lbregistrar writes: the contract
// users, their alerts and their GitOps tools read. docs/operations.md
// ("Conditions", "Events") says what each means and what to do;
// TestReasonsAreDocumented keeps the two in step.

// Reasons of the Ready condition.
const (
	ReasonRegistered  = "Registered"
	ReasonRegistering = "Registering"
	ReasonPending     = "Pending"
	// ReasonHeld: some backend sets keep what is registered because their
	// desired state is uncertain (Degraded says why).
	ReasonHeld = "Held"
	// ReasonWriteFailed: a write failed after its retries (409, 429, 5xx,
	// a failed work request, no answer); also the Warning event of each.
	ReasonWriteFailed = "WriteFailed"
	// ReasonWriteRefused: OCI refused a write for what it contains (400, a
	// limit), which sending it again cannot help; also its Warning event.
	ReasonWriteRefused = "WriteRefused"
	// ReasonNotAuthorized: OCI answered 401 or 403: the identity is not
	// who OCI knows (a key not yet active, a wrong fingerprint), or no
	// policy lets it write.
	ReasonNotAuthorized = "NotAuthorized"
	// ReasonBackendSetNotFound: a backend set to register in does not
	// exist in a load balancer that does.
	ReasonBackendSetNotFound = "BackendSetNotFound"
	// ReasonNotAuthorizedOrNotFound: OCI answers 404 NotAuthorizedOrNotFound
	// for the load balancer itself: it does not exist, or no IAM policy
	// lets the identity read it.
	ReasonNotAuthorizedOrNotFound = "NotAuthorizedOrNotFound"
	ReasonDeleting                = "Deleting"
	// ReasonMoving: the backends in a load balancer the spec no longer
	// names are drained, before the new one is registered.
	ReasonMoving = "Moving"
	// ReasonSuspended: the Suspended condition's, while spec.suspend is true.
	ReasonSuspended = "Suspended"
	// ReasonDryRun: serve --dry-run plans writes without making them; also
	// the Event of each write not made.
	ReasonDryRun = "DryRun"
)

// Reasons of the Ready condition, and of the Warning event, when the
// resource's identity cannot be used: nothing is written until it can.
const (
	ReasonSecretNotFound               = "SecretNotFound"
	ReasonInvalidCredentials           = "InvalidCredentials"
	ReasonCredentialReadError          = "CredentialReadError"
	ReasonSecretNamespaceNotAllowed    = "SecretNamespaceNotAllowed"
	ReasonIdentityUnsupported          = "IdentityUnsupported"
	ReasonControllerIdentityNotAllowed = "ControllerIdentityNotAllowed"
	ReasonUncheckedIdentity            = "UncheckedIdentity"
	ReasonServiceAccountNamespace      = "ServiceAccountNamespaceNotAllowed"
	// ReasonServiceAccountNotFound: the ServiceAccount to sign in as does
	// not exist.
	ReasonServiceAccountNotFound = "ServiceAccountNotFound"
	// ReasonServiceAccountNotListed: the controller may not request the
	// ServiceAccount's tokens: the Role lbregistrar-workload-identity of
	// its namespace does not list it.
	ReasonServiceAccountNotListed = "ServiceAccountNotListed"
	// ReasonRegionNotSet: the controller's environment lacks the region
	// the OCI SDK needs for workload identity.
	ReasonRegionNotSet = "RegionNotSet"
	// ReasonSignInFailed: OCI refused the sign-in.
	ReasonSignInFailed = "SignInFailed"
	// ReasonSigningIn: a sign-in is under way and taking a while.
	ReasonSigningIn = "SigningIn"
)

// Reasons of the Degraded condition: what of the desired state could not
// be computed (the backend sets concerned keep what is registered), and
// what OCI reports of the backends registered.
const (
	ReasonAsExpected             = "AsExpected"
	ReasonServiceNotFound        = "ServiceNotFound"
	ReasonServiceTypeUnsupported = "ServiceTypeUnsupported"
	ReasonServicePortNotFound    = "ServicePortNotFound"
	ReasonServicePortProtocol    = "ServicePortProtocol"
	// ReasonListenersUnread: an NLB's listeners, which say whose protocol's
	// node port a backend set takes, could not be read.
	ReasonListenersUnread      = "ListenersUnread"
	ReasonServiceIPFamily      = "ServiceIPFamily"
	ReasonNodePortNotAllocated = "NodePortNotAllocated"
	ReasonInvalidNodeSelector  = "InvalidNodeSelector"
	ReasonNoEligibleNodes      = "NoEligibleNodes"
	ReasonNoReadyEndpoints     = "NoReadyEndpoints"
	// ReasonEndpointNotAPod: ready endpoints of a Pod target's Service
	// name no pod of its namespace; they are not registered.
	ReasonEndpointNotAPod = "EndpointNotAPod"
	// ReasonHealthCheckNodePort: a backend set with Pod targets has a
	// health checker that probes a port only nodes answer (kube-proxy's
	// 10256, a node port): every pod backend is CRITICAL.
	ReasonHealthCheckNodePort = "HealthCheckNodePort"
	// ReasonEndpointsGone: the EndpointSlice controller publishes no
	// endpoint for a Pod target's Service (scaled to zero, deleted pods):
	// its pods' backends are drained, then removed.
	ReasonEndpointsGone = "EndpointsGone"
	// ReasonPodAddressUnreachable: endpoints of a Pod target have
	// addresses of their node's pod range (an overlay network), which the
	// load balancer cannot reach; they are not registered.
	ReasonPodAddressUnreachable = "PodAddressUnreachable"
	// ReasonPodPrivateIPNotFound: endpoints of a Pod target in a backend
	// set that selects its backends by instance (an NLB set preserving
	// the client's source) have addresses that are no private IP of their
	// node's VNICs, or run on a node with no instance OCID; they are not
	// registered.
	ReasonPodPrivateIPNotFound = "PodPrivateIPNotFound"
	// ReasonPrivateIPsUnread: the private IPs of a node's instance, which
	// such a backend set takes pods by, could not be read (often an IAM
	// policy without read of instances, vnic-attachments or private-ips);
	// the backend set keeps its registered backends.
	ReasonPrivateIPsUnread   = "PrivateIPsUnread"
	ReasonNoReadyNodes       = "NoReadyNodes"
	ReasonNodeWithoutAddress = "NodeWithoutAddress"
	ReasonDuplicateBackend   = "DuplicateBackend"
	// ReasonBackendLimit: a backend set has, or is wanted to have, nine
	// tenths or more of the backends OCI lets it have.
	ReasonBackendLimit = "BackendLimit"
	// ReasonInstanceRegistered: a wanted backend is left out because
	// another writer registered its instance, at another address, on the
	// same port; OCI takes an instance once per port.
	ReasonInstanceRegistered = "InstanceRegistered"
	// ReasonBackendsUnhealthy: OCI reports backends this resource owns
	// WARNING or CRITICAL. Registration itself succeeded, so Ready stays.
	ReasonBackendsUnhealthy = "BackendsUnhealthy"
)

// Reasons of the readiness gate's pod condition (ReadinessGate).
const (
	// ReasonLoadBalancerReady (True): every backend set that registers the
	// pod has it serving, and OCI reports it OK where that is awaited.
	ReasonLoadBalancerReady = "LoadBalancerReady"
	// ReasonNotRegistered (True): the controller writes no backend for the
	// pod (its node not selected, excluded or leaving, its address not of
	// the backend set's family or unreachable, ...), so nothing is awaited.
	ReasonNotRegistered = "NotRegistered"
	// ReasonGatesReleased (True): the LBRegistrars it waited for carry
	// ReleaseGatesAnnotation.
	ReasonGatesReleased = "GatesReleased"
	// ReasonLoadBalancerPending (False): the pod's backend is being
	// registered, or OCI's health check has not passed yet.
	ReasonLoadBalancerPending = "LoadBalancerPending"
	// ReasonLoadBalancerBlocked (False): the controller cannot write the
	// pod's backend (a Conflict, an identity it may not use, OCI refusing
	// the write or its limit, the resource suspended); a person must act,
	// or release the gate (ReleaseGatesAnnotation).
	ReasonLoadBalancerBlocked = "LoadBalancerBlocked"
)

// ReasonClaimed is the reason of the Conflict condition (and of Ready)
// when a backend set this one names belongs to another resource.
const ReasonClaimed = "BackendSetClaimed"

// Reasons of Events only.
const (
	ReasonBackendSetUpdated = "BackendSetUpdated"
	// ReasonCleanupAbandoned: a deletion gave up after the cleanup timeout.
	ReasonCleanupAbandoned = "CleanupAbandoned"
	// ReasonBackendsKept: a deletion left the resource's backends
	// registered (deletionPolicy Orphan, suspended, the CRD being deleted).
	ReasonBackendsKept = "BackendsKept"
	// ReasonRecordLarge: the ownership record nears the size the API
	// server can store.
	ReasonRecordLarge = "OwnershipRecordLarge"
	// ReasonRecordUnverified: an ownership record was set aside because it
	// does not carry the controller's signature.
	ReasonRecordUnverified = "OwnershipRecordUnverified"
)
