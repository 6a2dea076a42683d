package webhook

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/peppy-ratio/lbregistrar/api/v1beta1"
	"github.com/peppy-ratio/lbregistrar/api/validation"
)

// IdentityPolicy says which OCI identities a write may make lbregistrar
// sign in with. The controller reads API key Secrets and requests
// ServiceAccount tokens with its own rights, and signs OCI calls with what
// it gets; without this check anyone allowed to write an LBRegistrar could
// have it sign in as any key or service account the controller can reach,
// against any load balancer. So a writer may name only what it could use
// itself: an API key Secret it may get, a ServiceAccount it may create
// tokens for. The controller's own identity (its service account's
// workload identity, implicit or named, its node's instance principal) is
// no one's to name unless serve allows it, and then only for writers
// granted ControllerIdentityVerb on ControllerIdentityResource.
//
// The same goes for another resource's standing: a write that names an
// LBRegistrar in validation.ReplacesAnnotation, which hands that one's
// backend sets to this one, needs the right to update it.
type IdentityPolicy struct {
	// Namespaces are the namespaces lbregistrar serve reads API keys from
	// (--secret-namespaces); any when empty.
	Namespaces []string

	// AllowControllerIdentity lets resources sign in as the controller
	// itself (serve --allow-controller-identity).
	AllowControllerIdentity bool

	// Controller is the username the controller runs as (the validators
	// fill it in): a workload identity naming its ServiceAccount is the
	// controller's own identity.
	Controller string

	// Reviewer creates the SubjectAccessReviews that ask whether the writer
	// may use what the object names.
	Reviewer client.Writer

	// Grants, when set, remembers the answers that allowed, so a burst of
	// writes naming the same key by the same writer asks the API server
	// once (a SubjectAccessReview is a round trip through a server that may
	// be busy with the very writes being admitted). Refusals are never
	// remembered: a right just granted counts at once.
	Grants *GrantCache
}

// The right a writer needs to let a resource sign in as the controller,
// when serve allows it at all: verb use on identities.nodes.peppy-ratio.dev
// named controller. No such resource exists; RBAC grants it like any other
// (cluster-admin has it), as PodSecurityPolicy's use verb was granted.
const (
	ControllerIdentityVerb     = "use"
	ControllerIdentityResource = "identities"
	ControllerIdentityName     = "controller"
)

// GrantTTL is how long Register's webhooks remember that a writer has a
// right: a revoked right stops counting within it. kube-apiserver's own
// cache of webhook authorization decisions keeps allowed ones five minutes.
const GrantTTL = 10 * time.Second

// GrantCache remembers, for a while, which writers have which rights.
// It is safe for concurrent use.
type GrantCache struct {
	ttl time.Duration
	now func() time.Time

	mu      sync.Mutex
	expires map[string]time.Time // by grantKey
}

// maxGrants bounds a GrantCache: when full, expired entries go, and if none
// had, everything does. Writers and what they name are few in practice.
const maxGrants = 10000

// NewGrantCache remembers grants for ttl.
func NewGrantCache(ttl time.Duration) *GrantCache {
	return &GrantCache{ttl: ttl, now: time.Now, expires: map[string]time.Time{}}
}

func (c *GrantCache) granted(key string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	exp, ok := c.expires[key]
	return ok && c.now().Before(exp)
}

func (c *GrantCache) grant(key string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.now()
	if len(c.expires) >= maxGrants {
		maps.DeleteFunc(c.expires, func(_ string, exp time.Time) bool { return !now.Before(exp) })
		if len(c.expires) >= maxGrants {
			clear(c.expires)
		}
	}
	c.expires[key] = now.Add(c.ttl)
}

// grantKey names a writer, everything authorization may look at of it
// (name, UID, groups, extra), and a right, unambiguously.
func grantKey(writer authenticationv1.UserInfo, attrs *authorizationv1.ResourceAttributes) string {
	extraKeys := slices.Sorted(maps.Keys(writer.Extra))
	extra := make([][]string, len(extraKeys))
	for i, k := range extraKeys {
		extra[i] = append([]string{k}, writer.Extra[k]...)
	}
	key, _ := json.Marshal([]any{writer.Username, writer.UID, writer.Groups, extra, attrs})
	return string(key)
}

// right is what a writer must be allowed to name one thing a spec signs in
// with, and how a refusal reads.
type right struct {
	field *field.Path
	attrs authorizationv1.ResourceAttributes
	rule  string
	// refusal says why, after "<writer> may not ".
	refusal string
}

// rightsFor lists the rights a writer needs for the identity spec names,
// and refuses at once what no writer may name.
func (p IdentityPolicy) rightsFor(spec *v1beta1.LBRegistrarSpec) ([]right, field.ErrorList) {
	errs := validation.ValidateSecretNamespaces(spec, p.Namespaces)
	var rights []right
	for _, ref := range validation.SecretReferences(spec) {
		if !validation.SecretNamespaceAllowed(ref.Namespace, p.Namespaces) {
			continue
		}
		rights = append(rights, right{
			field: ref.Field, rule: validation.RuleSecretAccess,
			attrs: authorizationv1.ResourceAttributes{Namespace: ref.Namespace, Verb: "get", Resource: "secrets", Name: ref.Name},
			refusal: fmt.Sprintf("get Secret %s/%s: lbregistrar signs OCI calls with the API key a resource names, so only someone who may read that key may name it",
				ref.Namespace, ref.Name),
		})
	}
	sa, asController := validation.ServiceAccountReference(spec), validation.ControllerIdentity(spec, p.Controller)
	switch {
	case asController != nil && !p.AllowControllerIdentity:
		errs = append(errs, field.Forbidden(asController, "lbregistrar serve does not let resources sign in as the controller itself (--allow-controller-identity); name another workloadIdentity.serviceAccount, or an apiKey").
			WithOrigin(validation.RuleControllerIdentity))
	case asController != nil:
		rights = append(rights, right{
			field: asController, rule: validation.RuleControllerIdentity,
			attrs: authorizationv1.ResourceAttributes{Verb: ControllerIdentityVerb, Group: v1beta1.GroupVersion.Group, Resource: ControllerIdentityResource, Name: ControllerIdentityName},
			refusal: fmt.Sprintf("sign in as the lbregistrar controller: that takes %s on %s.%s named %s (docs/operations.md, \"Signing in to OCI\")",
				ControllerIdentityVerb, ControllerIdentityResource, v1beta1.GroupVersion.Group, ControllerIdentityName),
		})
	case sa != nil && !validation.SecretNamespaceAllowed(sa.Namespace, p.Namespaces):
		// refused above
	case sa != nil:
		rights = append(rights, right{
			field: sa.Field, rule: validation.RuleServiceAccountAccess,
			attrs: authorizationv1.ResourceAttributes{Namespace: sa.Namespace, Verb: "create", Resource: "serviceaccounts", Subresource: "token", Name: sa.Name},
			refusal: fmt.Sprintf("create tokens for ServiceAccount %s/%s: lbregistrar signs OCI calls as the service account a resource names, so only someone who may do so may name it",
				sa.Namespace, sa.Name),
		})
	}
	return rights, errs
}

// replacesPath is the field of ReplacesAnnotation.
var replacesPath = field.NewPath("metadata", "annotations").Key(validation.ReplacesAnnotation)

// rightsToReplace lists the rights a write needs for the resources its
// ReplacesAnnotation names that the stored one (old, nil on create) did
// not: update on each. A replacement takes over the backend sets of what
// it replaces, so naming one takes the rights of its owner.
func rightsToReplace(annotations, old map[string]string) []right {
	var rights []right
	for _, name := range validation.Replaces(annotations) {
		if slices.Contains(validation.Replaces(old), name) {
			continue
		}
		rights = append(rights, right{
			field: replacesPath, rule: validation.RuleReplacesAccess,
			attrs:   authorizationv1.ResourceAttributes{Verb: "update", Group: v1beta1.GroupVersion.Group, Resource: "lbregistrars", Name: name},
			refusal: fmt.Sprintf("update LBRegistrar %s: a resource that replaces another takes over its backend sets, so only someone who may update that one may name it", name),
		})
	}
	return rights
}

// rightsToRegister lists the rights a write needs for the Services its
// targets name that the stored object's (old, none on create) did not:
// update on each. Registering a Service puts its pods, or the nodes
// serving them, behind a load balancer its writer chose, and with
// readiness gates makes the pods' readiness wait for it: both change how
// the Service behaves, which is what update on it grants. Reading a
// Service (get) is granted far more widely, to its viewers.
func rightsToRegister(services, old []validation.ServiceReference) []right {
	var rights []right
	for _, ref := range services {
		if slices.ContainsFunc(old, func(o validation.ServiceReference) bool { return o.Namespace == ref.Namespace && o.Name == ref.Name }) {
			continue
		}
		rights = append(rights, right{
			field: ref.Field, rule: validation.RuleServiceAccess,
			attrs: authorizationv1.ResourceAttributes{Namespace: ref.Namespace, Verb: "update", Resource: "services", Name: ref.Name},
			refusal: fmt.Sprintf("update Service %s/%s: registering a Service puts its pods behind a load balancer, and makes their readiness gates wait for it, so only someone who may change the Service may name it",
				ref.Namespace, ref.Name),
		})
	}
	return rights
}

// check refuses the rights writer lacks, each on its field.
func (p IdentityPolicy) check(ctx context.Context, writer authenticationv1.UserInfo, rights []right) (field.ErrorList, error) {
	var errs field.ErrorList
	for _, r := range rights {
		allowed, err := p.allowed(ctx, writer, &r.attrs)
		if err != nil {
			return nil, err
		}
		if !allowed {
			errs = append(errs, field.Forbidden(r.field, writer.Username+" may not "+r.refusal).WithOrigin(r.rule))
		}
	}
	return errs, nil
}

func (p IdentityPolicy) allowed(ctx context.Context, writer authenticationv1.UserInfo, attrs *authorizationv1.ResourceAttributes) (bool, error) {
	var key string
	if p.Grants != nil {
		key = grantKey(writer, attrs)
		if p.Grants.granted(key) {
			return true, nil
		}
	}
	extra := make(map[string]authorizationv1.ExtraValue, len(writer.Extra))
	for k, v := range writer.Extra {
		extra[k] = authorizationv1.ExtraValue(v)
	}
	review := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
		User: writer.Username, Groups: writer.Groups, UID: writer.UID, Extra: extra,
		ResourceAttributes: attrs.DeepCopy(),
	}}
	if err := p.Reviewer.Create(ctx, review); err != nil {
		return false, fmt.Errorf("asking whether %s may %s %s %s/%s: %w", writer.Username, attrs.Verb, attrs.Resource, attrs.Namespace, attrs.Name, err)
	}
	if review.Status.Allowed && p.Grants != nil {
		p.Grants.grant(key)
	}
	return review.Status.Allowed, nil
}
