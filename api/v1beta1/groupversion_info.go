// Package v1beta1 is the stored hub version of LBRegistrar: one resource per load
// balancer, every target stating its backend set and weight explicitly.
// +kubebuilder:object:generate=true
// +groupName=nodes.peppy-ratio.dev
package v1beta1

import (
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/scheme"
)

var (
	// GroupVersion is the group and version of these types.
	GroupVersion = schema.GroupVersion{Group: "nodes.peppy-ratio.dev", Version: "v1beta1"}

	// SchemeBuilder registers these types with a runtime.Scheme.
	SchemeBuilder = &scheme.Builder{GroupVersion: GroupVersion}

	// AddToScheme adds these types to a runtime.Scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)
