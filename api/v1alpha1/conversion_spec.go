package v1alpha1

import (
	"slices"

	"github.com/peppy-ratio/lbregistrar/api/v1beta1"
)

// defaultWeight is the weight of a target that gives none, as the original operator did.
const defaultWeight = 1

// NormalizeSpec turns a v1alpha1 spec into the explicit v1beta1 form, with the
// rules the original operator registered existing objects by, so that taking
// them over changes no backend (docs/migration.md, "Compatibility contract"):
//   - a non-empty services list is used, and service, nodePort and port are
//     ignored; an item's own backend set and (positive) weight win over
//     spec.backendSetName and spec.weight;
//   - else a single service becomes one target registered with
//     spec.backendSetName and spec.weight: the original ignored
//     service.backendSetName and service.weight, so they count only where the
//     top level has no value (which its CRD never allowed);
//   - else port (or, when port is unset, nodePort) becomes one fixed-port
//     target with spec.backendSetName and spec.weight;
//   - a weight that is 0 or negative everywhere means 1.
func NormalizeSpec(in *LBRegistrarSpec) v1beta1.LBRegistrarSpec {
	out := v1beta1.LBRegistrarSpec{
		LoadBalancerID: in.LoadBalancerID,
		APIKey:         hubAPIKey(in.APIKey),
	}
	switch {
	case len(in.Services) > 0:
		out.Services = make([]v1beta1.Target, 0, len(in.Services))
		for i := range in.Services {
			s := &in.Services[i]
			weight := positiveOr(s.Weight, positiveOr(in.Weight, defaultWeight))
			out.Services = append(out.Services, serviceTarget(s, firstNonEmpty(s.BackendSetName, in.BackendSetName), weight))
		}
	case in.Service != nil:
		s := in.Service
		weight := positiveOr(in.Weight, positiveOr(s.Weight, defaultWeight))
		out.Services = []v1beta1.Target{serviceTarget(s, firstNonEmpty(in.BackendSetName, s.BackendSetName), weight)}
	case in.Port > 0 || in.NodePort > 0:
		out.Services = []v1beta1.Target{{
			NodePort:       int32(positiveOr(in.Port, in.NodePort)),
			BackendSetName: in.BackendSetName,
			Weight:         int32(positiveOr(in.Weight, defaultWeight)),
		}}
	}
	return out
}

// DenormalizeSpec is the canonical v1alpha1 form of a v1beta1 spec: the
// Service targets become the services list; without any, the first fixed port
// becomes nodePort, so the v1alpha1 view keeps a target. Fields v1alpha1 has
// no place for (nodeSelector, passphrase, the other fixed ports, a target's
// type) are left out; the caller keeps them in an annotation.
func DenormalizeSpec(in *v1beta1.LBRegistrarSpec) LBRegistrarSpec {
	out := LBRegistrarSpec{
		LoadBalancerID: in.LoadBalancerID,
		APIKey:         spokeAPIKey(in),
		Weight:         defaultWeight, // the v1alpha1 schema default, so defaulting changes nothing
	}
	view := alphaViewOf(in.Services)
	if t := view.nodePort; t != nil {
		out.NodePort = int(t.NodePort)
		out.BackendSetName = t.BackendSetName
		out.Weight = int(t.Weight)
		return out
	}
	for _, t := range view.services {
		s := ServiceSpec{
			Name:              t.Name,
			Namespace:         t.Namespace,
			FilterByEndpoints: t.FilterByEndpoints,
			Weight:            int(t.Weight),
			BackendSetName:    t.BackendSetName,
		}
		if t.Port != nil {
			s.Port = *t.Port
		}
		out.Services = append(out.Services, s)
	}
	return out
}

// alphaView is how v1alpha1 shows the targets of a v1beta1 spec: Service
// targets as the services list, else one fixed port as nodePort, since
// v1alpha1 ignores nodePort beside services and has room for one fixed port.
type alphaView struct {
	services []*v1beta1.Target
	nodePort *v1beta1.Target
	// hidden are the fixed ports v1alpha1 cannot show.
	hidden []*v1beta1.Target
}

func alphaViewOf(targets []v1beta1.Target) alphaView {
	var view alphaView
	var fixed []*v1beta1.Target
	for i := range targets {
		if targets[i].NodePort != 0 {
			fixed = append(fixed, &targets[i])
		} else {
			view.services = append(view.services, &targets[i])
		}
	}
	if len(view.services) == 0 && len(fixed) > 0 {
		view.nodePort, fixed = fixed[0], fixed[1:]
	}
	view.hidden = fixed
	return view
}

func serviceTarget(s *ServiceSpec, backendSet string, weight int) v1beta1.Target {
	port := s.Port
	return v1beta1.Target{
		Name:              s.Name,
		Namespace:         s.Namespace,
		Port:              &port,
		FilterByEndpoints: s.FilterByEndpoints,
		BackendSetName:    backendSet,
		Weight:            int32(weight),
	}
}

func hubAPIKey(in APIKeySpec) *v1beta1.APIKey {
	return &v1beta1.APIKey{
		User:        in.User,
		Fingerprint: in.Fingerprint,
		Tenancy:     in.Tenancy,
		Region:      in.Region,
		PrivateKey: v1beta1.SecretKeySource{
			Namespace:    in.PrivateKey.Namespace,
			SecretKeyRef: v1beta1.SecretKeyRef(in.PrivateKey.SecretKeyRef),
		},
	}
}

// spokeAPIKey is the v1alpha1 apiKey of spec, which v1alpha1 requires: a
// spec that signs in without a key shows only its region there, and the
// caller keeps its identity in an annotation.
func spokeAPIKey(spec *v1beta1.LBRegistrarSpec) APIKeySpec {
	in := spec.APIKey
	if in == nil {
		return APIKeySpec{Region: spec.Region()}
	}
	return APIKeySpec{
		User:        in.User,
		Fingerprint: in.Fingerprint,
		Tenancy:     in.Tenancy,
		Region:      in.Region,
		PrivateKey: SecretKeySpec{
			Namespace:    in.PrivateKey.Namespace,
			SecretKeyRef: SecretKeyRef(in.PrivateKey.SecretKeyRef),
		},
	}
}

// keyless reports whether a v1alpha1 apiKey names no key: what spokeAPIKey
// shows for a spec that signs in without one, its region perhaps edited.
func (k *APIKeySpec) keyless() bool {
	return k.User == "" && k.Fingerprint == "" && k.Tenancy == "" && k.PrivateKey == SecretKeySpec{}
}

// restoreHubOnly copies into spec what v1alpha1 cannot show from a v1beta1
// spec kept in an annotation: a v1alpha1 client that edited the object could
// not have meant to remove what it never saw. An identity other than an API
// key stays while the v1alpha1 apiKey (alphaKey) names no key; one that
// names a key was written to sign in with it. A hidden fixed port the client
// wrote again, into the same backend set, is not added a second time. A
// Service target keeps its type while it is still the same Service port
// into the same backend set at the same place in the list.
func restoreHubOnly(spec, kept *v1beta1.LBRegistrarSpec, alphaKey *APIKeySpec) {
	spec.NodeSelector = kept.NodeSelector
	spec.Suspend, spec.DeletionPolicy = kept.Suspend, kept.DeletionPolicy
	switch {
	case kept.APIKey != nil:
		spec.APIKey.Passphrase = kept.APIKey.Passphrase
	case alphaKey.keyless():
		// Still the identity v1alpha1 could not show; the region is the
		// one the client wrote.
		spec.APIKey = nil
		if w := kept.WorkloadIdentity; w != nil {
			spec.WorkloadIdentity = w.DeepCopy()
			spec.WorkloadIdentity.Region = alphaKey.Region
		}
		if p := kept.InstancePrincipal; p != nil {
			spec.InstancePrincipal = &v1beta1.InstancePrincipal{Region: alphaKey.Region}
		}
	}
	KeepTargetTypes(spec.Services, kept.Services)
	for _, t := range alphaViewOf(kept.Services).hidden {
		if !slices.ContainsFunc(spec.Services, func(u v1beta1.Target) bool {
			return u.NodePort == t.NodePort && u.BackendSetName == t.BackendSetName
		}) {
			spec.Services = append(spec.Services, *t)
		}
	}
}

// KeepTargetTypes gives the Service targets of targets, normalized from
// v1alpha1 fields, the types of the kept v1beta1 targets v1alpha1 showed
// in their place (the n-th Service target of each), where each is still the
// same Service port into the same backend set.
func KeepTargetTypes(targets, kept []v1beta1.Target) {
	shown := alphaViewOf(kept).services
	for i, k := 0, 0; i < len(targets) && k < len(shown); i++ {
		t := &targets[i]
		if t.NodePort != 0 {
			continue
		}
		if was := shown[k]; sameServicePort(t, was) {
			t.TargetType = was.TargetType
		}
		k++
	}
}

// sameServicePort reports whether a and b register the same Service port
// into the same backend set.
func sameServicePort(a, b *v1beta1.Target) bool {
	return a.Namespace == b.Namespace && a.Name == b.Name && a.BackendSetName == b.BackendSetName &&
		a.Port != nil && b.Port != nil && *a.Port == *b.Port
}

func positiveOr(v, fallback int) int {
	if v > 0 {
		return v
	}
	return fallback
}

func firstNonEmpty(a, b string) string {
	if a != "" {
		return a
	}
	return b
}
