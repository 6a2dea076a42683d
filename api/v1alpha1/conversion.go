package v1alpha1

import (
	"encoding/json"

	"k8s.io/apimachinery/pkg/api/equality"

	"github.com/peppy-ratio/lbregistrar/api/v1beta1"
)

const (
	// AlphaSpecAnnotation, on a v1beta1 object, keeps a v1alpha1 spec whose
	// exact shape (single service, port beside nodePort, ignored fields) the
	// v1beta1 form cannot hold, so that it reads back exactly as it was written.
	AlphaSpecAnnotation = "nodes.peppy-ratio.dev/v1alpha1-spec"

	// HubDataAnnotation, on a v1alpha1 object, keeps the v1beta1 spec and
	// status that v1alpha1 cannot express.
	HubDataAnnotation = "nodes.peppy-ratio.dev/v1beta1-data"
)

// hubData is the content of HubDataAnnotation; only the parts that v1alpha1
// could not carry are set.
type hubData struct {
	Spec   *v1beta1.LBRegistrarSpec   `json:"spec,omitempty"`
	Status *v1beta1.LBRegistrarStatus `json:"status,omitempty"`
}

// ToHub converts a v1alpha1 object to v1beta1.
func ToHub(src *LBRegistrar, dst *v1beta1.LBRegistrar) {
	kept := decodeAnnotation[hubData](src.Annotations, HubDataAnnotation)
	if kept == nil {
		kept = &hubData{}
	}

	dst.TypeMeta.APIVersion, dst.TypeMeta.Kind = v1beta1.GroupVersion.String(), "LBRegistrar"
	src.ObjectMeta.DeepCopyInto(&dst.ObjectMeta)
	dst.Annotations = withoutAnnotation(dst.Annotations, HubDataAnnotation)

	dst.Spec = NormalizeSpec(&src.Spec)
	if kept.Spec != nil {
		if semanticEqual(DenormalizeSpec(kept.Spec), src.Spec) {
			dst.Spec = *kept.Spec
		} else {
			restoreHubOnly(&dst.Spec, kept.Spec)
		}
	}
	if !semanticEqual(DenormalizeSpec(&dst.Spec), src.Spec) {
		dst.Annotations = withAnnotation(dst.Annotations, AlphaSpecAnnotation, src.Spec)
	}

	if kept.Status != nil && PhaseFromConditions(kept.Status.Conditions) == src.Status.Phase {
		dst.Status = *kept.Status
	} else {
		dst.Status = StatusFromPhase(src.Status.Phase, src.CreationTimestamp)
	}
}

// FromHub converts a v1beta1 object to
func FromHub(src *v1beta1.LBRegistrar, dst *LBRegistrar) {
	alphaSpec := decodeAnnotation[LBRegistrarSpec](src.Annotations, AlphaSpecAnnotation)

	dst.TypeMeta.APIVersion, dst.TypeMeta.Kind = GroupVersion.String(), "LBRegistrar"
	src.ObjectMeta.DeepCopyInto(&dst.ObjectMeta)
	dst.Annotations = withoutAnnotation(dst.Annotations, AlphaSpecAnnotation)

	// The kept v1alpha1 spec is used only while it still means the current
	// v1beta1 spec; after an edit through v1beta1 the canonical form is shown.
	if alphaSpec != nil && semanticEqual(NormalizeSpec(alphaSpec), src.Spec) {
		dst.Spec = *alphaSpec
	} else {
		dst.Spec = DenormalizeSpec(&src.Spec)
	}
	dst.Status.Phase = PhaseFromConditions(src.Status.Conditions)

	var lost hubData
	if !semanticEqual(NormalizeSpec(&dst.Spec), src.Spec) {
		lost.Spec = src.Spec.DeepCopy()
	}
	if !semanticEqual(StatusFromPhase(dst.Status.Phase, src.CreationTimestamp), src.Status) {
		lost.Status = src.Status.DeepCopy()
	}
	if lost.Spec != nil || lost.Status != nil {
		dst.Annotations = withAnnotation(dst.Annotations, HubDataAnnotation, lost)
	}
}

// semanticEqual compares as the API server does: nil and empty are the same.
func semanticEqual(a, b any) bool {
	return equality.Semantic.DeepEqual(a, b)
}

// decodeAnnotation reads a JSON annotation, or returns nil when it is missing
// or unreadable: conversion must not fail on what a user may have typed into
// metadata.
func decodeAnnotation[T any](annotations map[string]string, key string) *T {
	raw, ok := annotations[key]
	if !ok {
		return nil
	}
	v := new(T)
	if json.Unmarshal([]byte(raw), v) != nil {
		return nil
	}
	return v
}

// withAnnotation sets key to the JSON of value in annotations, which the caller owns.
func withAnnotation(annotations map[string]string, key string, value any) map[string]string {
	raw, err := json.Marshal(value)
	if err != nil {
		panic(err) // only plain API structs are marshalled here
	}
	if annotations == nil {
		annotations = map[string]string{}
	}
	annotations[key] = string(raw)
	return annotations
}

// withoutAnnotation removes key from annotations, which the caller owns.
func withoutAnnotation(annotations map[string]string, key string) map[string]string {
	delete(annotations, key)
	if len(annotations) == 0 {
		return nil
	}
	return annotations
}
