// Package v1alpha1 holds the original, single-service shape of LBRegistrar.
// It is served for existing users and converted to v1beta1, the stored hub.
// +kubebuilder:object:generate=true
// +groupName=nodes.peppy-ratio.dev
package v1alpha1

import (
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/scheme"
)

var (
	// GroupVersion is the group and version of these types.
	GroupVersion = schema.GroupVersion{Group: "nodes.peppy-ratio.dev", Version: "v1alpha1"}

	// SchemeBuilder registers these types with a runtime.Scheme.
	SchemeBuilder = &scheme.Builder{GroupVersion: GroupVersion}

	// AddToScheme adds these types to a runtime.Scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)
