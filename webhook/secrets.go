package webhook

import (
	"context"
	"fmt"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/peppy-ratio/lbregistrar/api/v1beta1"
	"github.com/peppy-ratio/lbregistrar/api/validation"
)

// SecretPolicy says whose API keys a write may make lbregistrar use. The
// controller reads API key Secrets with its own rights and signs OCI calls
// with them; without this check anyone allowed to write an LBRegistrar could
// have it sign with any key it can read, against any load balancer.
type SecretPolicy struct {
	// Namespaces are the namespaces lbregistrar serve reads API keys from
	// (--secret-namespaces); any when empty.
	Namespaces []string

	// Reviewer creates the SubjectAccessReviews that ask whether the writer
	// may get each Secret the object names.
	Reviewer client.Writer
}

// check refuses the Secrets of spec that lie outside p.Namespaces, and those
// inside that the writer may not get.
func (p SecretPolicy) check(ctx context.Context, writer authenticationv1.UserInfo, spec *v1beta1.LBRegistrarSpec) (field.ErrorList, error) {
	errs := validation.ValidateSecretNamespaces(spec, p.Namespaces)
	for _, ref := range validation.SecretReferences(spec) {
		if !validation.SecretNamespaceAllowed(ref.Namespace, p.Namespaces) {
			continue
		}
		allowed, err := p.mayGet(ctx, writer, ref)
		if err != nil {
			return nil, err
		}
		if !allowed {
			errs = append(errs, field.Forbidden(ref.Field, fmt.Sprintf(
				"%s may not get Secret %s/%s: lbregistrar signs OCI calls with the API key a resource names, so only someone who may read that key may name it",
				writer.Username, ref.Namespace, ref.Name)).WithOrigin(validation.RuleSecretAccess))
		}
	}
	return errs, nil
}

func (p SecretPolicy) mayGet(ctx context.Context, writer authenticationv1.UserInfo, ref validation.SecretReference) (bool, error) {
	extra := make(map[string]authorizationv1.ExtraValue, len(writer.Extra))
	for k, v := range writer.Extra {
		extra[k] = authorizationv1.ExtraValue(v)
	}
	review := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
		User: writer.Username, Groups: writer.Groups, UID: writer.UID, Extra: extra,
		ResourceAttributes: &authorizationv1.ResourceAttributes{
			Namespace: ref.Namespace, Verb: "get", Resource: "secrets", Name: ref.Name,
		},
	}}
	if err := p.Reviewer.Create(ctx, review); err != nil {
		return false, fmt.Errorf("asking whether %s may get Secret %s/%s: %w", writer.Username, ref.Namespace, ref.Name, err)
	}
	return review.Status.Allowed, nil
}
