// Package v1alpha1 contains the original, single-service shape of LBRegistrar.
// It is served for existing users and converted to v1beta1, the stored hub.
// +kubebuilder:object:generate=true
// +groupName=nodes.peppy-ratio.dev
package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

var (
	// GroupVersion is the group and version of these types.
	GroupVersion = schema.GroupVersion{Group: "nodes.peppy-ratio.dev", Version: "v1alpha1"}

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
