// Package claims finds the LBRegistrars that claim a (load balancer, backend
// set) pair, through a field index over the manager's cache: the admission
// webhook refuses a second claim with it, and the reconciler resolves with it
// the race that two creates admitted at the same instant leave (see
// validation.Precedes). The rules themselves are pure, in api/validation.
package claims

import (
	"context"
	"fmt"
	"slices"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/peppy-ratio/lbregistrar/api/v1beta1"
	"github.com/peppy-ratio/lbregistrar/api/validation"
)

// IndexField is the field index, over *v1beta1.LBRegistrar, from a claim key
// (validation.ClaimKey) to the resources that hold that claim.
const IndexField = "spec.backendSetClaims"

// Keys is the indexer function of IndexField.
func Keys(obj client.Object) []string {
	lbr, ok := obj.(*v1beta1.LBRegistrar)
	if !ok {
		return nil
	}
	return validation.ClaimKeys(&lbr.Spec)
}

// AddIndex registers IndexField with a manager's field indexer. Call it
// once per manager, before the webhooks or the reconciler are set up: both
// read through it.
func AddIndex(ctx context.Context, indexer client.FieldIndexer) error {
	return indexer.IndexField(ctx, &v1beta1.LBRegistrar{}, IndexField, Keys)
}

// Of returns the resources that claim (loadBalancerID, backendSet).
func Of(ctx context.Context, reader client.Reader, loadBalancerID, backendSet string) ([]v1beta1.LBRegistrar, error) {
	var list v1beta1.LBRegistrarList
	key := validation.ClaimKey(loadBalancerID, backendSet)
	if err := reader.List(ctx, &list, client.MatchingFields{IndexField: key}); err != nil {
		return nil, fmt.Errorf("reading the LBRegistrars that claim %s: %w", key, err)
	}
	return list.Items, nil
}

// OfSpec returns the resources that claim any (load balancer, backend set)
// of spec, each once. It costs one index lookup per backend set of spec,
// whatever the number of LBRegistrars.
func OfSpec(ctx context.Context, reader client.Reader, spec *v1beta1.LBRegistrarSpec) ([]v1beta1.LBRegistrar, error) {
	var all []v1beta1.LBRegistrar
	seen := map[string]bool{}
	for _, t := range spec.Services {
		if seen[t.BackendSetName] {
			continue
		}
		seen[t.BackendSetName] = true
		found, err := Of(ctx, reader, spec.LoadBalancerID, t.BackendSetName)
		if err != nil {
			return nil, err
		}
		for _, item := range found {
			if !slices.ContainsFunc(all, func(c v1beta1.LBRegistrar) bool { return c.Name == item.Name }) {
				all = append(all, item)
			}
		}
	}
	return all, nil
}
