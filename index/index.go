// Package index finds LBRegistrars through field indexes over the
// manager's cache: those that claim a (load balancer, backend set) pair,
// with which the admission webhook refuses a second claim and the
// reconciler resolves the race that two creates admitted at the same
// instant leave (see validation.Precedes); and those that name a Service,
// with which a Service's events reach the resources that read it and the
// pod webhook finds the targets that gate a pod, a lookup per Service
// rather than a scan of every resource. The rules themselves are pure, in
// api/validation.
package index

import (
	"context"
	"fmt"
	"slices"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/peppy-ratio/lbregistrar/api/v1beta1"
	"github.com/peppy-ratio/lbregistrar/api/validation"
)

// ClaimField is the field index, over *v1beta1.LBRegistrar, from a claim key
// (validation.ClaimKey) to the resources that make that claim.
const ClaimField = "spec.backendSetClaims"

// ClaimFieldKeys is the indexer function of ClaimField.
func ClaimFieldKeys(obj client.Object) []string {
	lbr, ok := obj.(*v1beta1.LBRegistrar)
	if !ok {
		return nil
	}
	return validation.ClaimKeys(&lbr.Spec)
}

// ServiceField is the field index, over *v1beta1.LBRegistrar, from a
// Service ("namespace/name") to the resources whose targets name it.
const ServiceField = "spec.services"

// ServiceFieldKeys is the indexer function of ServiceField.
func ServiceFieldKeys(obj client.Object) []string {
	lbr, ok := obj.(*v1beta1.LBRegistrar)
	if !ok {
		return nil
	}
	var keys []string
	for _, t := range lbr.Spec.Services {
		if key := t.Namespace + "/" + t.Name; t.Name != "" && !slices.Contains(keys, key) {
			keys = append(keys, key)
		}
	}
	return keys
}

// Add registers ClaimField and ServiceField with a manager's field
// indexer. Call it once per manager, before the webhooks or the reconciler
// are set up: both read through them.
func Add(ctx context.Context, indexer client.FieldIndexer) error {
	if err := indexer.IndexField(ctx, &v1beta1.LBRegistrar{}, ClaimField, ClaimFieldKeys); err != nil {
		return err
	}
	return indexer.IndexField(ctx, &v1beta1.LBRegistrar{}, ServiceField, ServiceFieldKeys)
}

// Naming returns the resources whose targets name the Service, in place
// (the reader's own objects, not to be changed).
func Naming(ctx context.Context, reader client.Reader, service types.NamespacedName) ([]v1beta1.LBRegistrar, error) {
	var list v1beta1.LBRegistrarList
	if err := reader.List(ctx, &list, client.MatchingFields{ServiceField: service.String()}, client.UnsafeDisableDeepCopy); err != nil {
		return nil, fmt.Errorf("reading the LBRegistrars that name Service %s: %w", service, err)
	}
	return list.Items, nil
}

// Claiming returns the resources that claim (loadBalancerID, backendSet).
func Claiming(ctx context.Context, reader client.Reader, loadBalancerID, backendSet string) ([]v1beta1.LBRegistrar, error) {
	var list v1beta1.LBRegistrarList
	key := validation.ClaimKey(loadBalancerID, backendSet)
	if err := reader.List(ctx, &list, client.MatchingFields{ClaimField: key}); err != nil {
		return nil, fmt.Errorf("reading the LBRegistrars that claim %s: %w", key, err)
	}
	return list.Items, nil
}

// ClaimingAny returns the resources that claim any (load balancer, backend set)
// of spec, each once. It costs one index lookup per backend set of spec,
// whatever the number of LBRegistrars.
func ClaimingAny(ctx context.Context, reader client.Reader, spec *v1beta1.LBRegistrarSpec) ([]v1beta1.LBRegistrar, error) {
	var all []v1beta1.LBRegistrar
	seen := map[string]bool{}
	for _, t := range spec.Services {
		if seen[t.BackendSetName] {
			continue
		}
		seen[t.BackendSetName] = true
		found, err := Claiming(ctx, reader, spec.LoadBalancerID, t.BackendSetName)
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
