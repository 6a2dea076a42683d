// Package webhook serves LBRegistrar admission (both validating webhooks),
// the readiness gates' mutating webhook for pods, and the webhook server
// they and the conversion webhook (package conversion) run on. The
// handlers are thin: the rules are package validation (and, for the gates,
// desired.GatesPods), the claim lookup is package index.
package webhook

import (
	"context"
	"fmt"

	authenticationv1 "k8s.io/api/authentication/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"
)

// Paths the API server calls; config/ and the tests point at them.
const (
	ValidateV1alpha1Path = "/validate-nodes-peppy-ratio-dev-v1alpha1-lbregistrar"
	ValidateV1beta1Path  = "/validate-nodes-peppy-ratio-dev-v1beta1-lbregistrar"
)

// Register adds both validating webhooks and the readiness gates'
// mutating one to the manager's webhook server.
// They find other claimants through the manager's cache, with the index
// index.Add registers, and check what a write makes lbregistrar sign
// in with by identities (its Namespaces and AllowControllerIdentity, as
// serve's flags say), asking the API server through the manager's client
// and remembering grants for GrantTTL. controller is the username the
// controller runs and writes status as: the only one that may change an
// ownership record, and whose ServiceAccount is the controller's identity.
func Register(mgr manager.Manager, identities IdentityPolicy, controller string) {
	identities.Reviewer, identities.Grants = mgr.GetClient(), NewGrantCache(GrantTTL)
	mgr.GetWebhookServer().Register(ValidateV1alpha1Path, NewV1alpha1Validator(mgr.GetCache(), identities, controller))
	mgr.GetWebhookServer().Register(ValidateV1beta1Path, NewV1beta1Validator(mgr.GetCache(), identities, controller))
	mgr.GetWebhookServer().Register(MutatePodPath, NewPodGate(mgr.GetCache()))
	mgr.GetWebhookServer().Register(UngatePodPath, NewPodUngate())
}

// WhoAmI asks the API server which username c writes as (a
// SelfSubjectReview, which every authenticated identity may create): the
// controller's, which Register is given.
func WhoAmI(ctx context.Context, c client.Client) (string, error) {
	review := &authenticationv1.SelfSubjectReview{}
	if err := c.Create(ctx, review); err != nil {
		return "", fmt.Errorf("asking the API server who this process is: %w", err)
	}
	return review.Status.UserInfo.Username, nil
}
