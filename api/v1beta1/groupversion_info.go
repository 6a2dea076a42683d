// Package v1beta1 is the stored hub version of LBRegistrar: one resource per load
// balancer, every target stating its backend set and weight explicitly.
// +kubebuilder:object:generate=true
// +groupName=nodes.peppy-ratio.dev
package v1beta1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

var (
	// GroupVersion is the group and version of these types.
	GroupVersion = schema.GroupVersion{Group: "nodes.peppy-ratio.dev", Version: "v1beta1"}

	// SchemeBuilder registers these types with a runtime.Scheme.
	SchemeBuilder = runtime.NewSchemeBuilder(addKnownTypes)

	// AddToScheme adds these types to a runtime.Scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)

// addKnownTypes registers LBRegistrar and its list in GroupVersion.
func addKnownTypes(s *runtime.Scheme) error {
	s.AddKnownTypes(GroupVersion, &LBRegistrar{}, &LBRegistrarList{})
	metav1.AddToGroupVersion(s, GroupVersion)
	return nil
}
