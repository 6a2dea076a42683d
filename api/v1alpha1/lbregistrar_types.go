package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// LBRegistrarSpec is the original spec. A resource names its targets in one
// of three ways, tried in this order: the services list, the single service,
// or a fixed node port (port, then nodePort).
// +kubebuilder:validation:XValidation:rule="(has(self.services) && size(self.services) > 0) || has(self.service) || (has(self.nodePort) && self.nodePort > 0) || (has(self.port) && self.port > 0)",message="at least one target is required: services, service, nodePort or port"
type LBRegistrarSpec struct {
	// LoadBalancerID is the OCID of a load balancer or network load balancer.
	// +kubebuilder:validation:MinLength=1
	LoadBalancerID string `json:"loadBalancerId"`

	// NodePort registers this fixed port on every node when no service is given.
	// Deprecated: use v1beta1 services[].nodePort.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=65535
	// +optional
	NodePort int `json:"nodePort,omitempty"`

	// Port is an older alias of nodePort; when both are set, port wins.
	// Deprecated: use v1beta1 services[].nodePort.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=65535
	// +optional
	Port int `json:"port,omitempty"`

	// Service is the single service to register.
	// Deprecated: use services.
	// +optional
	Service *ServiceSpec `json:"service,omitempty"`

	// Services lists every service to register. When it is not empty,
	// service, nodePort and port are ignored.
	// +kubebuilder:validation:MaxItems=256
	// +optional
	Services []ServiceSpec `json:"services,omitempty"`

	// Weight of every backend registered by the single service or fixed port.
	// Deprecated: use v1beta1 services[].weight.
	// +kubebuilder:default=1
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=100
	// +optional
	Weight int `json:"weight,omitempty"`

	// BackendSetName is the backend set of every target that does not name its own.
	// Deprecated: use services[].backendSetName.
	// +optional
	BackendSetName string `json:"backendSetName,omitempty"`

	// APIKey is the OCI API signing key used to call OCI.
	APIKey APIKeySpec `json:"apiKey"`
}

// ServiceSpec names one Service port whose NodePort is registered on every node.
type ServiceSpec struct {
	// Name of the Service.
	Name string `json:"name"`
	// Namespace of the Service.
	Namespace string `json:"namespace"`

	// Port is the Service port, by number or by name.
	// +kubebuilder:validation:XIntOrString
	Port intstr.IntOrString `json:"port"`

	// FilterByEndpoints registers only nodes that host ready endpoints of the Service.
	// +optional
	FilterByEndpoints bool `json:"filterByEndpoints,omitempty"`

	// Weight of the backends this service registers (1-100); 0 means
	// spec.weight. The original CRD stored 1 by default.
	// +kubebuilder:default=1
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=100
	// +optional
	Weight int `json:"weight,omitempty"`

	// BackendSetName overrides spec.backendSetName for this service.
	// +optional
	BackendSetName string `json:"backendSetName,omitempty"`
}

// APIKeySpec is an OCI API signing key.
type APIKeySpec struct {
	// User is the OCID of the user the key belongs to.
	User string `json:"user"`
	// Fingerprint of the key's public half, as OCI shows it (16 hex pairs).
	Fingerprint string `json:"fingerprint"`
	// Tenancy is the OCID of the user's tenancy.
	Tenancy string `json:"tenancy"`
	// Region of the load balancer (identifier like ap-tokyo-1, or key like nrt).
	Region string `json:"region"`
	// PrivateKey is where the PEM private key is kept.
	PrivateKey SecretKeySpec `json:"privateKey"`
}

// SecretKeySpec points at one key of a Secret.
type SecretKeySpec struct {
	// Namespace of the Secret; lbregistrar reads only the namespaces of
	// serve --secret-namespaces.
	Namespace string `json:"namespace"`
	// SecretKeyRef names the Secret and its key.
	SecretKeyRef SecretKeyRef `json:"secretKeyRef"`
}

// SecretKeyRef names a Secret and a key in it.
type SecretKeyRef struct {
	// Name of the Secret.
	Name string `json:"name"`
	// Key in the Secret's data.
	Key string `json:"key"`
}

// Phase is the coarse state the original operator reported.
type Phase string

// Phases written by the original operator.
const (
	PhasePending     Phase = "PENDING"
	PhaseRegistering Phase = "REGISTERING"
	PhaseReady       Phase = "READY"
)

// LBRegistrarStatus is the original status: one phase.
type LBRegistrarStatus struct {
	// +optional
	Phase Phase `json:"phase,omitempty"`
}

// LBRegistrar registers Kubernetes nodes into OCI load balancer backend sets.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Cluster,shortName=lbr
// +kubebuilder:deprecatedversion:warning="nodes.peppy-ratio.dev/v1alpha1 LBRegistrar is deprecated; use nodes.peppy-ratio.dev/v1beta1"
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="Load Balancer",type=string,JSONPath=`.spec.loadBalancerId`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type LBRegistrar struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   LBRegistrarSpec   `json:"spec,omitempty"`
	Status LBRegistrarStatus `json:"status,omitempty"`
}

// LBRegistrarList is a list of LBRegistrar.
// +kubebuilder:object:root=true
type LBRegistrarList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []LBRegistrar `json:"items"`
}
