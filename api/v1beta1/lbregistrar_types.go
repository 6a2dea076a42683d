package v1beta1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// LBRegistrarSpec says which node ports to keep registered in which backend
// sets of one OCI load balancer or network load balancer.
// +kubebuilder:validation:XValidation:rule="[has(self.apiKey), has(self.workloadIdentity), has(self.instancePrincipal)].exists_one(x, x)",message="set exactly one of apiKey, workloadIdentity and instancePrincipal"
type LBRegistrarSpec struct {
	// LoadBalancerID is the OCID of a load balancer (ocid1.loadbalancer.…)
	// or network load balancer (ocid1.networkloadbalancer.…).
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:XValidation:rule="self.startsWith('ocid1.loadbalancer.') || self.startsWith('ocid1.networkloadbalancer.')",message="must be the OCID of a load balancer or network load balancer"
	LoadBalancerID string `json:"loadBalancerId"`

	// How lbregistrar signs in to OCI for this resource: exactly one of
	// apiKey, workloadIdentity and instancePrincipal.

	// APIKey signs in with an OCI API signing key kept in a Secret.
	// +optional
	APIKey *APIKey `json:"apiKey,omitempty"`

	// WorkloadIdentity signs in with OKE workload identity: a Kubernetes
	// service account token is exchanged for a short-lived OCI session, and
	// no key is stored in the cluster.
	// +optional
	WorkloadIdentity *WorkloadIdentity `json:"workloadIdentity,omitempty"`

	// InstancePrincipal signs in as the compute instance the controller
	// runs on, an identity every resource using it shares: lbregistrar
	// serve must allow it (--allow-controller-identity), and whoever names
	// it must be allowed to (admission asks the API server).
	// +optional
	InstancePrincipal *InstancePrincipal `json:"instancePrincipal,omitempty"`

	// Services lists every target; each registers into one backend set the
	// nodes (node IP:node port) or, with targetType Pod, the pods (pod
	// IP:port) that serve it.
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=256
	// +listType=atomic
	Services []Target `json:"services"`

	// NodeSelector restricts registration to nodes whose labels match.
	// Nodes are otherwise chosen as Kubernetes' service controller does.
	// +optional
	NodeSelector *metav1.LabelSelector `json:"nodeSelector,omitempty"`

	// Suspend, while true, stops every write to OCI for this resource: its
	// backends stay as they are and its ownership record is kept, and
	// deleting it leaves its backends registered. Lifting it resumes from
	// where it stopped.
	// +optional
	Suspend bool `json:"suspend,omitempty"`

	// DeletionPolicy is what deleting the resource does to the backends it
	// registered: Delete (the default) drains and then removes them,
	// Orphan leaves them registered (a cluster rebuilt, a backend set
	// handed to another tool).
	// +kubebuilder:validation:Enum=Delete;Orphan
	// +optional
	DeletionPolicy DeletionPolicy `json:"deletionPolicy,omitempty"`
}

// DeletionPolicy is what deleting an LBRegistrar does to its backends.
type DeletionPolicy string

// Deletion policies; the empty one is Delete.
const (
	DeletionPolicyDelete DeletionPolicy = "Delete"
	DeletionPolicyOrphan DeletionPolicy = "Orphan"
)

// Target is one registration: a Service port (name, namespace, port) or a
// fixed nodePort, registered on every eligible node into backendSetName;
// or, with targetType Pod, a Service port's endpoints.
// +kubebuilder:validation:XValidation:rule="has(self.nodePort) != (has(self.name) && has(self.port))",message="set either name and port (a Service) or nodePort (a fixed port), not both"
// +kubebuilder:validation:XValidation:rule="!has(self.name) || has(self.__namespace__)",message="namespace is required with name"
// +kubebuilder:validation:XValidation:rule="!has(self.targetType) || self.targetType != 'Pod' || !has(self.nodePort)",message="targetType Pod registers a Service's endpoints: set name, namespace and port, not nodePort"
// +kubebuilder:validation:XValidation:rule="!has(self.targetType) || self.targetType != 'Pod' || !has(self.filterByEndpoints) || !self.filterByEndpoints",message="filterByEndpoints chooses nodes; targetType Pod registers the endpoints themselves"
type Target struct {
	// Name of the Service.
	// +optional
	Name string `json:"name,omitempty"`

	// Namespace of the Service.
	// +optional
	Namespace string `json:"namespace,omitempty"`

	// Port is the Service port, by number or by name: its NodePort is
	// registered on the nodes, or, with targetType Pod, its target port on
	// the pods.
	// +kubebuilder:validation:XIntOrString
	// +optional
	Port *intstr.IntOrString `json:"port,omitempty"`

	// TargetType is what each backend is: NodePort (the default) registers
	// every eligible node's address with the Service port's node port; Pod
	// registers each ready endpoint of the Service port by the address and
	// port its EndpointSlices give, for pods the load balancer reaches
	// directly (OKE VCN-native pod networking, virtual nodes).
	// +kubebuilder:validation:Enum=NodePort;Pod
	// +optional
	TargetType TargetType `json:"targetType,omitempty"`

	// NodePort is a fixed port registered on every node, for targets that are not a Service.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65535
	// +optional
	NodePort int32 `json:"nodePort,omitempty"`

	// FilterByEndpoints registers only nodes that host ready endpoints of the Service.
	// +optional
	FilterByEndpoints bool `json:"filterByEndpoints,omitempty"`

	// BackendSetName is the backend set the nodes or pods are registered in.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=32
	BackendSetName string `json:"backendSetName"`

	// Weight of every backend this target registers.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=100
	Weight int32 `json:"weight"`
}

// TargetType is what a target registers: nodes or pods.
type TargetType string

// Target types; the empty one is NodePort.
const (
	TargetTypeNodePort TargetType = "NodePort"
	TargetTypePod      TargetType = "Pod"
)

// Pods reports whether t registers a Service's endpoints rather than nodes.
func (t *Target) Pods() bool { return t.TargetType == TargetTypePod }

// APIKey is an OCI API signing key.
type APIKey struct {
	// User is the OCID of the user the key belongs to.
	User string `json:"user"`
	// Fingerprint of the key's public half, as OCI shows it (16 hex pairs).
	Fingerprint string `json:"fingerprint"`
	// Tenancy is the OCID of the user's tenancy.
	Tenancy string `json:"tenancy"`
	// Region of the load balancer (identifier like ap-tokyo-1, or key like nrt).
	Region string `json:"region"`
	// PrivateKey is where the PEM private key is kept. Whoever names it must
	// be allowed to read it (admission asks the API server).
	PrivateKey SecretKeySource `json:"privateKey"`

	// Passphrase of an encrypted private key.
	// +optional
	Passphrase *SecretKeySource `json:"passphrase,omitempty"`
}

// WorkloadIdentity is OKE workload identity: the IAM policies that let it
// write the load balancer name the cluster, and the namespace and name of
// the service account that signs in.
type WorkloadIdentity struct {
	// Region of the load balancer (identifier like ap-tokyo-1, or key like nrt).
	Region string `json:"region"`

	// ServiceAccount signs in for this resource: the controller requests a
	// short-lived token for it (TokenRequest), so IAM policies can be
	// written for this service account alone. Whoever names it must be
	// allowed to create tokens for it (admission asks the API server).
	// Without it, or naming the controller's own, the controller's own
	// service account signs in, which lbregistrar serve must allow
	// (--allow-controller-identity).
	// +optional
	ServiceAccount *ServiceAccountReference `json:"serviceAccount,omitempty"`
}

// ServiceAccountReference names a Kubernetes ServiceAccount.
type ServiceAccountReference struct {
	// Namespace of the ServiceAccount.
	Namespace string `json:"namespace"`
	// Name of the ServiceAccount.
	Name string `json:"name"`
}

// InstancePrincipal is the identity of the compute instance the controller
// runs on.
type InstancePrincipal struct {
	// Region of the load balancer (identifier like ap-tokyo-1, or key like nrt).
	Region string `json:"region"`
}

// SecretKeySource points at one key of a Secret.
type SecretKeySource struct {
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

// Condition types.
const (
	// ConditionReady is True when every backend set has what this resource should own.
	ConditionReady = "Ready"
	// ConditionDegraded is True when some of the desired state cannot be computed
	// or applied and what is registered was kept as it was, or when OCI
	// reports backends this resource owns unhealthy.
	ConditionDegraded = "Degraded"
	// ConditionConflict is True when another LBRegistrar claimed one of this
	// resource's backend sets first.
	ConditionConflict = "Conflict"
	// ConditionReconciling is True while the controller works towards what
	// the spec asks (registering, draining, retrying), and ConditionStalled
	// while a person must act, whatever else is also wrong (a conflict, an
	// identity it may not use, a write OCI refused): the kstatus convention
	// Flux and kpt read, following the state of Ready's reason.
	ConditionReconciling = "Reconciling"
	ConditionStalled     = "Stalled"
	// ConditionSuspended is True while spec.suspend is: nothing is written
	// to OCI, and the other conditions keep what the last reconcile before
	// it found, as Flux's suspended objects and Crossplane's paused
	// resources do (docs/operations.md, "Conditions").
	ConditionSuspended = "Suspended"
)

// Backend is one node address registered by this resource.
type Backend struct {
	// IP is the node's address.
	IP string `json:"ip"`
	// Port is the node port.
	Port int32 `json:"port"`
	// Weight is the weight it was registered with.
	Weight int32 `json:"weight"`
}

// BackendGroup is the backends of one port and weight in an ownership
// record. Grouped, a record of 5,000 nodes is an address per node rather
// than an object per node: a fraction of the size for the API server to
// store, cache and send to every watcher, and far below the object size
// limit.
type BackendGroup struct {
	// Port is the node port.
	Port int32 `json:"port"`
	// Weight is the weight the backends were registered with.
	Weight int32 `json:"weight"`
	// Addresses are the nodes' addresses, ordered, separated by single
	// spaces. One string rather than a list: the API server handles a list
	// item by item, and a status write of 3 x 5,000 addresses costs it
	// about 4 times the CPU as lists that it does as strings.
	// +optional
	Addresses string `json:"addresses,omitempty"`
	// IPs are the nodes' addresses, as records written before Addresses
	// listed them; read, never written.
	// +optional
	// +listType=atomic
	IPs []string `json:"ips,omitempty"`
	// IP is one node's address, as records written before grouping kept
	// each backend; read, never written.
	// +optional
	IP string `json:"ip,omitempty"`
}

// DrainingGroup is owned backends of one port that were marked drain at
// one time.
type DrainingGroup struct {
	// Since is when they were marked drain.
	Since metav1.Time `json:"since"`
	// Port is the node port.
	Port int32 `json:"port"`
	// Addresses are the nodes' addresses, ordered, separated by single
	// spaces.
	Addresses string `json:"addresses"`
}

// WorkRequest is the last OCI work request written for a backend set.
type WorkRequest struct {
	// ID is the work request's OCID.
	ID string `json:"id"`
	// Status is its last known state: ACCEPTED, SUCCEEDED or FAILED.
	Status string `json:"status,omitempty"`
	// Time is when it was accepted, or when it ended.
	Time metav1.Time `json:"time,omitempty"`
}

// BackendSetStatus records what this resource registered in one backend set.
// It is the ownership record: only these backends are ever removed.
type BackendSetStatus struct {
	// Name of the backend set.
	Name string `json:"name"`

	// Backends this resource registered there and owns, grouped by port
	// and weight: the only ones it ever changes or removes. Read and write
	// them with Owned and SetOwned.
	// +optional
	// +listType=atomic
	Backends []BackendGroup `json:"backends,omitempty"`

	// Drained is set once the controller has marked this resource's
	// backends drain here, ahead of removing them when the resource is
	// deleted. A backend whose drain mark is gone when the drain period
	// ends was taken back into service by another writer (another cluster
	// sharing the backend set) and is left to it.
	// +optional
	Drained bool `json:"drained,omitempty"`

	// Draining are owned backends this resource marked drain because it
	// no longer wants them (their node left, was excluded, or stopped
	// hosting the Service's endpoints), grouped by when and port. Each is
	// removed once the node drain period has passed since, or serves again
	// if wanted before that. Read and write them with DrainingBackends and
	// SetDraining.
	// +optional
	// +listType=atomic
	Draining []DrainingGroup `json:"draining,omitempty"`

	// LastWorkRequest is the last write this resource made there.
	// +optional
	LastWorkRequest *WorkRequest `json:"lastWorkRequest,omitempty"`

	// Health is what OCI's health checks last said of the backends this
	// resource owns there, read after each write and on each resync;
	// absent when it could not be read.
	// +optional
	Health *BackendSetHealth `json:"health,omitempty"`
}

// MaxUnhealthyNamed bounds BackendSetHealth.Unhealthy.
const MaxUnhealthyNamed = 10

// BackendSetHealth counts this resource's own backends in one backend set
// by the health OCI reports for each; backends others registered are left
// out of the counts.
type BackendSetHealth struct {
	// Status is OCI's overall status of the backend set, over all of its
	// backends, others' too: OK, WARNING, CRITICAL or UNKNOWN.
	Status string `json:"status"`
	// OK is how many own backends OCI reports OK.
	OK int32 `json:"ok"`
	// Warning is how many own backends OCI reports WARNING.
	Warning int32 `json:"warning"`
	// Critical is how many own backends OCI reports CRITICAL.
	Critical int32 `json:"critical"`
	// Unknown is how many own backends OCI reports UNKNOWN: not checked yet,
	// or no health data.
	Unknown int32 `json:"unknown"`
	// Unhealthy names (ip:port) the own backends OCI reports CRITICAL, then
	// those it reports WARNING, at most 10 of them.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=10
	Unhealthy []string `json:"unhealthy,omitempty"`
}

// LBRegistrarStatus is the observed state.
type LBRegistrarStatus struct {
	// ObservedGeneration is the metadata.generation the status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// Targets is the number of targets (spec.services items) at observedGeneration.
	// +optional
	Targets int32 `json:"targets,omitempty"`

	// Conditions: Ready (every backend set has what this resource should
	// own), Reconciling (the controller moves it on by itself), Stalled (a
	// person must act), Degraded (a target could not be resolved, or OCI
	// reports own backends unhealthy), Conflict (another LBRegistrar keeps
	// one of its backend sets) and Suspended (spec.suspend is true; the
	// others keep what the last reconcile found).
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// LoadBalancerID is the load balancer backendSets refers to; when the
	// spec names another one, the registrations recorded here are removed
	// from this one first.
	// +optional
	LoadBalancerID string `json:"loadBalancerId,omitempty"`

	// BackendSets is the ownership record, per backend set of
	// loadBalancerId.
	// +optional
	// +listType=map
	// +listMapKey=name
	BackendSets []BackendSetStatus `json:"backendSets,omitempty"`

	// RecordSignature is the controller's signature of the ownership
	// record (loadBalancerId and the backends of backendSets) under a key
	// only it has. A record whose signature does not verify is not acted
	// on: nothing it lists is removed. Written by the controller only.
	// +optional
	// +kubebuilder:validation:MaxLength=128
	RecordSignature string `json:"recordSignature,omitempty"`

	// Healthy is how many of the own backends whose health was read OCI
	// reports OK, of how many, over every backend set, e.g. "3/4".
	// +optional
	Healthy string `json:"healthy,omitempty"`
}

// LBRegistrar registers Kubernetes nodes, or a Service's pods, into OCI
// load balancer and network load balancer backend sets.
// +kubebuilder:object:root=true
// +kubebuilder:storageversion
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Cluster,shortName=lbr
// +kubebuilder:printcolumn:name="Load Balancer",type=string,JSONPath=`.spec.loadBalancerId`
// +kubebuilder:printcolumn:name="Services",type=integer,JSONPath=`.status.targets`
// +kubebuilder:printcolumn:name="Backend Sets",type=string,JSONPath=`.spec.services[*].backendSetName`,priority=1
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].reason`,priority=1
// +kubebuilder:printcolumn:name="Healthy",type=string,JSONPath=`.status.healthy`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type LBRegistrar struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   LBRegistrarSpec   `json:"spec,omitempty"`
	Status LBRegistrarStatus `json:"status,omitempty"`
}

// Hub marks v1beta1 as the version every other one converts through.
func (*LBRegistrar) Hub() {}

// LBRegistrarList is a list of LBRegistrar.
// +kubebuilder:object:root=true
type LBRegistrarList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []LBRegistrar `json:"items"`
}
