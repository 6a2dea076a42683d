package status

import (
	"github.com/peppy-ratio/lbregistrar/api/v1alpha1"
	"github.com/peppy-ratio/lbregistrar/api/v1beta1"
)

// State is who moves a resource on from a reason it is in.
type State string

const (
	// Ready means nothing is wrong (Ready True).
	Ready State = "Ready"
	// Reconciling means the controller moves it on by itself: a write under
	// way, a drain, a retried fault, a wait for the cluster.
	Reconciling State = "Reconciling"
	// Stalled means a person must act, whatever else is also wrong. The
	// controller may still try again (a policy may be propagating, a
	// ServiceAccount may be created), but nothing it does mends it.
	Stalled State = "Stalled"
	// Degraded means some of the desired state is not computed, or OCI reports
	// own backends unhealthy. It describes the cluster, which the
	// controller watches, and whether anyone must act depends on intent
	// it cannot know (a Service the same apply creates, pods scaled to
	// zero on purpose, nodes being upgraded): a warning beside Ready, and
	// what holds a backend set (Ready's Held, Reconciling).
	Degraded State = "Degraded"
)

// States is the state each reason of the Ready, Conflict and Degraded
// conditions stands for: the one table the conditions are computed from,
// which docs/operations.md ("Conditions") repeats; TestStatesAreDocumented
// keeps the two equal.
var States = map[string]State{
	v1beta1.ReasonRegistered: Ready,

	v1beta1.ReasonRegistering: Reconciling,
	v1beta1.ReasonPending:     Reconciling,
	v1beta1.ReasonHeld:        Reconciling,
	v1beta1.ReasonWriteFailed: Reconciling,
	v1beta1.ReasonDeleting:    Reconciling,
	v1beta1.ReasonMoving:      Reconciling,
	v1beta1.ReasonDryRun:      Reconciling,
	v1beta1.ReasonSigningIn:   Reconciling,
	// An API error reading the Secret or requesting a token: retried.
	v1beta1.ReasonCredentialReadError: Reconciling,
	v1alpha1.ReasonLegacyPhase:        Reconciling,

	v1beta1.ReasonWriteRefused:                 Stalled,
	v1beta1.ReasonNotAuthorized:                Stalled,
	v1beta1.ReasonBackendSetNotFound:           Stalled,
	v1beta1.ReasonNotAuthorizedOrNotFound:      Stalled,
	v1beta1.ReasonClaimed:                      Stalled,
	v1beta1.ReasonSecretNotFound:               Stalled,
	v1beta1.ReasonInvalidCredentials:           Stalled,
	v1beta1.ReasonSecretNamespaceNotAllowed:    Stalled,
	v1beta1.ReasonIdentityUnsupported:          Stalled,
	v1beta1.ReasonControllerIdentityNotAllowed: Stalled,
	v1beta1.ReasonUncheckedIdentity:            Stalled,
	v1beta1.ReasonServiceAccountNamespace:      Stalled,
	v1beta1.ReasonServiceAccountNotFound:       Stalled,
	v1beta1.ReasonServiceAccountNotListed:      Stalled,
	v1beta1.ReasonRegionNotSet:                 Stalled,
	v1beta1.ReasonSignInFailed:                 Stalled,

	v1beta1.ReasonServiceNotFound:        Degraded,
	v1beta1.ReasonServiceTypeUnsupported: Degraded,
	v1beta1.ReasonServicePortNotFound:    Degraded,
	v1beta1.ReasonServicePortProtocol:    Degraded,
	v1beta1.ReasonListenersUnread:        Degraded,
	v1beta1.ReasonServiceIPFamily:        Degraded,
	v1beta1.ReasonNodePortNotAllocated:   Degraded,
	v1beta1.ReasonInvalidNodeSelector:    Degraded,
	v1beta1.ReasonNoEligibleNodes:        Degraded,
	v1beta1.ReasonNoReadyEndpoints:       Degraded,
	v1beta1.ReasonEndpointNotAPod:        Degraded,
	v1beta1.ReasonHealthCheckNodePort:    Degraded,
	v1beta1.ReasonEndpointsGone:          Degraded,
	v1beta1.ReasonPodAddressUnreachable:  Degraded,
	v1beta1.ReasonPodPrivateIPNotFound:   Degraded,
	v1beta1.ReasonPrivateIPsUnread:       Degraded,
	v1beta1.ReasonNoReadyNodes:           Degraded,
	v1beta1.ReasonNodeWithoutAddress:     Degraded,
	v1beta1.ReasonDuplicateBackend:       Degraded,
	v1beta1.ReasonBackendLimit:           Degraded,
	v1beta1.ReasonInstanceRegistered:     Degraded,
	v1beta1.ReasonBackendsUnhealthy:      Degraded,
}

// StateOf is the state of reason; one the table lacks is Reconciling, the
// state that neither fails an apply nor passes it.
func StateOf(reason string) State {
	if s, ok := States[reason]; ok {
		return s
	}
	return Reconciling
}
