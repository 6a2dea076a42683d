// Package webhook serves LBRegistrar admission (both validating webhooks)
// and the webhook server they and the conversion webhook (package
// conversion) run on. The handlers are thin: the rules are package
// validation, the claim lookup is package claims.
package webhook

import "sigs.k8s.io/controller-runtime/pkg/manager"

// Paths the API server calls; config/ and the tests point at them.
const (
	ValidateV1alpha1Path = "/validate-nodes-peppy-ratio-dev-v1alpha1-lbregistrar"
	ValidateV1beta1Path  = "/validate-nodes-peppy-ratio-dev-v1beta1-lbregistrar"
)

// Register adds both validating webhooks to the manager's webhook server.
// They find other claimants through the manager's cache, with the index
// claims.AddIndex registers. secretNamespaces are the namespaces API keys
// are read from (serve --secret-namespaces; any when empty), see
// SecretPolicy; grants are remembered for GrantTTL.
func Register(mgr manager.Manager, secretNamespaces []string) {
	secrets := SecretPolicy{Namespaces: secretNamespaces, Reviewer: mgr.GetClient(), Grants: NewGrantCache(GrantTTL)}
	mgr.GetWebhookServer().Register(ValidateV1alpha1Path, NewV1alpha1Validator(mgr.GetCache(), secrets))
	mgr.GetWebhookServer().Register(ValidateV1beta1Path, NewV1beta1Validator(mgr.GetCache(), secrets))
}
