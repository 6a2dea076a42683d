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

	// Grants, when set, remembers the answers that allowed, so a burst of
	// writes naming the same key by the same writer asks the API server
	// once (a SubjectAccessReview is a round trip through a server that may
	// be busy with the very writes being admitted). Refusals are never
	// remembered: a right just granted counts at once.
	Grants *GrantCache
}

// GrantTTL is how long Register's webhooks remember that a writer may get a
// Secret: a revoked right stops counting within it. kube-apiserver's own
// cache of webhook authorization decisions keeps allowed ones five minutes.
const GrantTTL = 10 * time.Second

// GrantCache remembers, for a while, which writers may get which Secrets.
// It is safe for concurrent use.
type GrantCache struct {
	ttl time.Duration
	now func() time.Time

	mu      sync.Mutex
	expires map[string]time.Time // by grantKey
}

// maxGrants bounds a GrantCache: when full, expired entries go, and if none
// had, everything does. Writers and key Secrets are few in practice.
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
// (name, UID, groups, extra), and a Secret, unambiguously.
func grantKey(writer authenticationv1.UserInfo, ref validation.SecretReference) string {
	extraKeys := slices.Sorted(maps.Keys(writer.Extra))
	extra := make([][]string, len(extraKeys))
	for i, k := range extraKeys {
		extra[i] = append([]string{k}, writer.Extra[k]...)
	}
	key, _ := json.Marshal([]any{writer.Username, writer.UID, writer.Groups, extra, ref.Namespace, ref.Name})
	return string(key)
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
	var key string
	if p.Grants != nil {
		key = grantKey(writer, ref)
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
		ResourceAttributes: &authorizationv1.ResourceAttributes{
			Namespace: ref.Namespace, Verb: "get", Resource: "secrets", Name: ref.Name,
		},
	}}
	if err := p.Reviewer.Create(ctx, review); err != nil {
		return false, fmt.Errorf("asking whether %s may get Secret %s/%s: %w", writer.Username, ref.Namespace, ref.Name, err)
	}
	if review.Status.Allowed && p.Grants != nil {
		p.Grants.grant(key)
	}
	return review.Status.Allowed, nil
}
