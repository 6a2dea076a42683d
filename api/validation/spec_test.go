package validation

import (
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/peppy-ratio/lbregistrar/api/v1beta1"
)

const (
	testLB      = "ocid1.loadbalancer.oc1.ap-tokyo-1.aaaaaaaaexample"
	testNLB     = "ocid1.networkloadbalancer.oc1.ap-tokyo-1.amaaaaaaexample"
	testUser    = "ocid1.user.oc1..aaaaaaaaexampleuser"
	testTenancy = "ocid1.tenancy.oc1..aaaaaaaaexampletenancy"
	testFP      = "12:34:56:78:9a:bc:de:f0:12:34:56:78:9a:bc:de:f0"
)

func servicePort(p intstr.IntOrString) *intstr.IntOrString { return &p }

// validHub is a v1beta1 object every rule accepts.
func validHub(name string) *v1beta1.LBRegistrar {
	obj := &v1beta1.LBRegistrar{Spec: v1beta1.LBRegistrarSpec{
		LoadBalancerID: testNLB,
		APIKey: &v1beta1.APIKey{
			User: testUser, Tenancy: testTenancy, Fingerprint: testFP, Region: "ap-tokyo-1",
			PrivateKey: v1beta1.SecretKeySource{Namespace: "lbregistrar-system", SecretKeyRef: v1beta1.SecretKeyRef{Name: "oci-api-key", Key: "private-key"}},
		},
		Services: []v1beta1.Target{
			{Name: "istio-ingressgateway", Namespace: "istio-system", Port: servicePort(intstr.FromString("https")), BackendSetName: "ingress", Weight: 1},
			{Name: "istio-ingressgateway", Namespace: "istio-system", Port: servicePort(intstr.FromInt32(80)), BackendSetName: "ingress_http", Weight: 100},
			{NodePort: 30443, BackendSetName: "edge", Weight: 5},
		},
	}}
	obj.Name = name
	return obj
}

// failure is what a test expects of one error: where and which rule.
type failure struct{ field, rule string }

func failures(errs field.ErrorList) []failure {
	out := make([]failure, 0, len(errs))
	for _, e := range errs {
		out = append(out, failure{e.Field, e.Origin})
	}
	return out
}

func checkFailures(t *testing.T, errs field.ErrorList, want []failure) {
	t.Helper()
	got := failures(errs)
	if !slices.Equal(got, want) {
		t.Errorf("errors = %v, want %v\n%v", got, want, errs.ToAggregate())
	}
	for _, e := range errs {
		if e.Origin == "" {
			t.Errorf("error without a rule: %v", e)
		}
	}
}

func TestValidateSpec(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(*v1beta1.LBRegistrarSpec)
		want   []failure
	}{
		{"valid", func(*v1beta1.LBRegistrarSpec) {}, nil},
		{"classic load balancer", func(s *v1beta1.LBRegistrarSpec) { s.LoadBalancerID = testLB }, nil},
		{"region key", func(s *v1beta1.LBRegistrarSpec) { s.APIKey.Region = "nrt" }, nil},
		{"government region", func(s *v1beta1.LBRegistrarSpec) { s.APIKey.Region = "us-gov-ashburn-1" }, nil},
		{"upper-case fingerprint", func(s *v1beta1.LBRegistrarSpec) { s.APIKey.Fingerprint = strings.ToUpper(testFP) }, nil},
		{"passphrase", func(s *v1beta1.LBRegistrarSpec) {
			s.APIKey.Passphrase = &v1beta1.SecretKeySource{Namespace: "ns", SecretKeyRef: v1beta1.SecretKeyRef{Name: "key", Key: "passphrase"}}
		}, nil},
		{"OCID with a future-use segment", func(s *v1beta1.LBRegistrarSpec) { s.LoadBalancerID = "ocid1.loadbalancer.oc1.ap-tokyo-1.x.aaaa" }, nil},
		{"secret key with dots and a subdomain name", func(s *v1beta1.LBRegistrarSpec) {
			s.APIKey.PrivateKey.SecretKeyRef = v1beta1.SecretKeyRef{Name: "oci.api-key", Key: "private.pem"}
		}, nil},
		{"workload identity of the controller", func(s *v1beta1.LBRegistrarSpec) {
			s.APIKey, s.WorkloadIdentity = nil, &v1beta1.WorkloadIdentity{Region: "ap-tokyo-1"}
		}, nil},
		{"workload identity of a service account", func(s *v1beta1.LBRegistrarSpec) {
			s.APIKey, s.WorkloadIdentity = nil, &v1beta1.WorkloadIdentity{Region: "nrt", ServiceAccount: &v1beta1.ServiceAccountReference{Namespace: "team-a", Name: "lb.writer"}}
		}, nil},
		{"instance principal", func(s *v1beta1.LBRegistrarSpec) {
			s.APIKey, s.InstancePrincipal = nil, &v1beta1.InstancePrincipal{Region: "us-ashburn-1"}
		}, nil},
		{"same backend set from two Services", func(s *v1beta1.LBRegistrarSpec) { s.Services[1].BackendSetName = "ingress" }, nil},
		{"a Service port's node port and its endpoints in one backend set", func(s *v1beta1.LBRegistrarSpec) {
			pods := s.Services[0]
			pods.TargetType = v1beta1.TargetTypePod
			s.Services = append(s.Services, pods)
		}, nil},
		{"targetType NodePort spelled out", func(s *v1beta1.LBRegistrarSpec) { s.Services[0].TargetType = v1beta1.TargetTypeNodePort }, nil},
		{"same Service port in two backend sets", func(s *v1beta1.LBRegistrarSpec) {
			s.Services[1].Port = servicePort(intstr.FromString("https"))
		}, nil},

		{"missing load balancer", func(s *v1beta1.LBRegistrarSpec) { s.LoadBalancerID = "" },
			[]failure{{"spec.loadBalancerId", RuleLoadBalancerID}}},
		{"OCID of something else", func(s *v1beta1.LBRegistrarSpec) { s.LoadBalancerID = "ocid1.instance.oc1.ap-tokyo-1.aaaa" },
			[]failure{{"spec.loadBalancerId", RuleLoadBalancerID}}},
		{"not an OCID", func(s *v1beta1.LBRegistrarSpec) { s.LoadBalancerID = "my-load-balancer" },
			[]failure{{"spec.loadBalancerId", RuleLoadBalancerID}}},
		{"OCID without unique id", func(s *v1beta1.LBRegistrarSpec) { s.LoadBalancerID = "ocid1.loadbalancer.oc1.ap-tokyo-1." },
			[]failure{{"spec.loadBalancerId", RuleLoadBalancerID}}},
		{"bad region", func(s *v1beta1.LBRegistrarSpec) { s.APIKey.Region = "Tokyo" },
			[]failure{{"spec.apiKey.region", RuleRegion}}},
		{"region with one word", func(s *v1beta1.LBRegistrarSpec) { s.APIKey.Region = "tokyo-1" },
			[]failure{{"spec.apiKey.region", RuleRegion}}},
		{"region without a number", func(s *v1beta1.LBRegistrarSpec) { s.APIKey.Region = "ap-tokyo-" },
			[]failure{{"spec.apiKey.region", RuleRegion}}},
		{"fingerprint with a non-hex pair", func(s *v1beta1.LBRegistrarSpec) { s.APIKey.Fingerprint = "zz" + testFP[2:] },
			[]failure{{"spec.apiKey.fingerprint", RuleFingerprint}}},
		{"OCID with an upper-case unique id", func(s *v1beta1.LBRegistrarSpec) { s.LoadBalancerID = testLB + "X" },
			[]failure{{"spec.loadBalancerId", RuleLoadBalancerID}}},
		{"OCID with an empty future-use segment", func(s *v1beta1.LBRegistrarSpec) { s.LoadBalancerID = "ocid1.loadbalancer.oc1.ap-tokyo-1..aaaa" },
			[]failure{{"spec.loadBalancerId", RuleLoadBalancerID}}},
		{"missing region", func(s *v1beta1.LBRegistrarSpec) { s.APIKey.Region = "" },
			[]failure{{"spec.apiKey.region", RuleRegion}}},
		{"user OCID as tenancy", func(s *v1beta1.LBRegistrarSpec) { s.APIKey.Tenancy = testUser },
			[]failure{{"spec.apiKey.tenancy", RuleTenancy}}},
		{"tenancy OCID as user", func(s *v1beta1.LBRegistrarSpec) { s.APIKey.User = testTenancy },
			[]failure{{"spec.apiKey.user", RuleUser}}},
		{"short fingerprint", func(s *v1beta1.LBRegistrarSpec) { s.APIKey.Fingerprint = "12:34:56" },
			[]failure{{"spec.apiKey.fingerprint", RuleFingerprint}}},
		{"fingerprint without colons", func(s *v1beta1.LBRegistrarSpec) { s.APIKey.Fingerprint = strings.ReplaceAll(testFP, ":", "") },
			[]failure{{"spec.apiKey.fingerprint", RuleFingerprint}}},
		{"private key without namespace, secret and key", func(s *v1beta1.LBRegistrarSpec) { s.APIKey.PrivateKey = v1beta1.SecretKeySource{} },
			[]failure{
				{"spec.apiKey.privateKey.namespace", RuleSecretReference},
				{"spec.apiKey.privateKey.secretKeyRef.name", RuleSecretReference},
				{"spec.apiKey.privateKey.secretKeyRef.key", RuleSecretReference},
			}},
		{"bad secret names", func(s *v1beta1.LBRegistrarSpec) {
			s.APIKey.PrivateKey = v1beta1.SecretKeySource{Namespace: "Kube_System", SecretKeyRef: v1beta1.SecretKeyRef{Name: "a b", Key: "k/y"}}
		}, []failure{
			{"spec.apiKey.privateKey.namespace", RuleSecretReference},
			{"spec.apiKey.privateKey.secretKeyRef.name", RuleSecretReference},
			{"spec.apiKey.privateKey.secretKeyRef.key", RuleSecretReference},
		}},
		{"empty passphrase reference", func(s *v1beta1.LBRegistrarSpec) { s.APIKey.Passphrase = &v1beta1.SecretKeySource{} },
			[]failure{
				{"spec.apiKey.passphrase.namespace", RuleSecretReference},
				{"spec.apiKey.passphrase.secretKeyRef.name", RuleSecretReference},
				{"spec.apiKey.passphrase.secretKeyRef.key", RuleSecretReference},
			}},
		{"unknown deletion policy", func(s *v1beta1.LBRegistrarSpec) { s.DeletionPolicy = "Retain" },
			[]failure{{"spec.deletionPolicy", RuleDeletionPolicy}}},
		{"no identity", func(s *v1beta1.LBRegistrarSpec) { s.APIKey = nil },
			[]failure{{"spec.apiKey", RuleIdentity}}},
		{"three identities", func(s *v1beta1.LBRegistrarSpec) {
			s.WorkloadIdentity = &v1beta1.WorkloadIdentity{Region: "ap-tokyo-1"}
			s.InstancePrincipal = &v1beta1.InstancePrincipal{Region: "ap-tokyo-1"}
		}, []failure{{"spec.workloadIdentity", RuleIdentity}, {"spec.instancePrincipal", RuleIdentity}}},
		{"workload identity: every mistake", func(s *v1beta1.LBRegistrarSpec) {
			s.APIKey, s.WorkloadIdentity = nil, &v1beta1.WorkloadIdentity{Region: "Tokyo", ServiceAccount: &v1beta1.ServiceAccountReference{Namespace: "Team_A"}}
		}, []failure{
			{"spec.workloadIdentity.region", RuleRegion},
			{"spec.workloadIdentity.serviceAccount.namespace", RuleServiceAccountReference},
			{"spec.workloadIdentity.serviceAccount.name", RuleServiceAccountReference},
		}},
		{"instance principal without region", func(s *v1beta1.LBRegistrarSpec) {
			s.APIKey, s.InstancePrincipal = nil, &v1beta1.InstancePrincipal{}
		}, []failure{{"spec.instancePrincipal.region", RuleRegion}}},
		{"no target", func(s *v1beta1.LBRegistrarSpec) { s.Services = nil },
			[]failure{{"spec.services", RuleTargetRequired}}},
		{"empty target", func(s *v1beta1.LBRegistrarSpec) { s.Services[2].NodePort = 0 },
			[]failure{{"spec.services[2]", RuleTargetKind}}},
		{"Service and nodePort", func(s *v1beta1.LBRegistrarSpec) { s.Services[0].NodePort = 30000 },
			[]failure{{"spec.services[0]", RuleTargetKind}}},
		{"unknown targetType", func(s *v1beta1.LBRegistrarSpec) { s.Services[0].TargetType = "Instance" },
			[]failure{{"spec.services[0].targetType", RuleTargetType}}},
		{"Pod target with nodePort and filterByEndpoints", func(s *v1beta1.LBRegistrarSpec) {
			s.Services[2].TargetType, s.Services[0].TargetType, s.Services[0].FilterByEndpoints = v1beta1.TargetTypePod, v1beta1.TargetTypePod, true
		}, []failure{{"spec.services[0].filterByEndpoints", RuleTargetType}, {"spec.services[2].nodePort", RuleTargetType}}},
		{"Service without name and namespace", func(s *v1beta1.LBRegistrarSpec) { s.Services[0].Name, s.Services[0].Namespace = "", "" },
			[]failure{{"spec.services[0].name", RuleServiceRef}, {"spec.services[0].namespace", RuleServiceRef}}},
		{"Service name not a DNS label", func(s *v1beta1.LBRegistrarSpec) { s.Services[0].Name = "1gateway" },
			[]failure{{"spec.services[0].name", RuleServiceRef}}},
		{"Service without port", func(s *v1beta1.LBRegistrarSpec) { s.Services[0].Port = nil },
			[]failure{{"spec.services[0].port", RulePort}}},
		{"Service port zero", func(s *v1beta1.LBRegistrarSpec) { s.Services[0].Port = servicePort(intstr.FromInt32(0)) },
			[]failure{{"spec.services[0].port", RulePort}}},
		{"Service port out of range", func(s *v1beta1.LBRegistrarSpec) { s.Services[0].Port = servicePort(intstr.FromInt32(65536)) },
			[]failure{{"spec.services[0].port", RulePort}}},
		{"Service port name invalid", func(s *v1beta1.LBRegistrarSpec) { s.Services[0].Port = servicePort(intstr.FromString("HTTPS_port")) },
			[]failure{{"spec.services[0].port", RulePort}}},
		{"nodePort out of range", func(s *v1beta1.LBRegistrarSpec) { s.Services[2].NodePort = 70000 },
			[]failure{{"spec.services[2].nodePort", RulePort}}},
		{"negative nodePort", func(s *v1beta1.LBRegistrarSpec) { s.Services[2].NodePort = -1 },
			[]failure{{"spec.services[2].nodePort", RulePort}}},
		{"weight zero", func(s *v1beta1.LBRegistrarSpec) { s.Services[0].Weight = 0 },
			[]failure{{"spec.services[0].weight", RuleWeight}}},
		{"weight above OCI's range", func(s *v1beta1.LBRegistrarSpec) { s.Services[0].Weight = 101 },
			[]failure{{"spec.services[0].weight", RuleWeight}}},
		{"weight above OCI's range on a classic load balancer", func(s *v1beta1.LBRegistrarSpec) {
			s.LoadBalancerID = testLB
			s.Services[2].Weight = 1000
		}, []failure{{"spec.services[2].weight", RuleWeight}}},
		{"missing backend set", func(s *v1beta1.LBRegistrarSpec) { s.Services[0].BackendSetName = "" },
			[]failure{{"spec.services[0].backendSetName", RuleBackendSetName}}},
		{"backend set with a space", func(s *v1beta1.LBRegistrarSpec) { s.Services[0].BackendSetName = "my set" },
			[]failure{{"spec.services[0].backendSetName", RuleBackendSetName}}},
		{"backend set too long", func(s *v1beta1.LBRegistrarSpec) { s.Services[0].BackendSetName = strings.Repeat("a", 33) },
			[]failure{{"spec.services[0].backendSetName", RuleBackendSetName}}},
		{"duplicate Service target", func(s *v1beta1.LBRegistrarSpec) { s.Services = append(s.Services, s.Services[0]) },
			[]failure{{"spec.services[3]", RuleDuplicateTarget}}},
		{"duplicate Service target differing only in endpoint filtering", func(s *v1beta1.LBRegistrarSpec) {
			dup := s.Services[0]
			dup.FilterByEndpoints = true
			s.Services = append(s.Services, dup)
		}, []failure{{"spec.services[3]", RuleDuplicateTarget}}},
		{"duplicate Pod target", func(s *v1beta1.LBRegistrarSpec) {
			s.Services[0].TargetType = v1beta1.TargetTypePod
			s.Services = append(s.Services, s.Services[0])
		}, []failure{{"spec.services[3]", RuleDuplicateTarget}}},
		{"one node port with two weights", func(s *v1beta1.LBRegistrarSpec) {
			dup := s.Services[2]
			dup.Weight = 9
			s.Services = append(s.Services, dup)
		}, []failure{{"spec.services[3]", RuleDuplicateTarget}}},
		{"as many targets as allowed", func(s *v1beta1.LBRegistrarSpec) { s.Services = fixedPorts(MaxTargets) }, nil},
		{"one target too many", func(s *v1beta1.LBRegistrarSpec) { s.Services = fixedPorts(MaxTargets + 1) },
			[]failure{{"spec.services", RuleTargetLimit}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			obj := validHub("a")
			tt.mutate(&obj.Spec)
			errs, warnings := ValidateCreate(obj)
			checkFailures(t, errs, tt.want)
			if len(warnings) != 0 {
				t.Errorf("warnings = %q, want none", warnings)
			}
		})
	}
}

// fixedPorts is n distinct, valid fixed-port targets.
func fixedPorts(n int) []v1beta1.Target {
	targets := make([]v1beta1.Target, n)
	for i := range targets {
		targets[i] = v1beta1.Target{NodePort: int32(30000 + i), BackendSetName: "edge", Weight: 1}
	}
	return targets
}

func TestDuplicateNamesBothEntriesAndWeights(t *testing.T) {
	obj := validHub("a")
	dup := obj.Spec.Services[2]
	dup.Weight = 9
	obj.Spec.Services = append(obj.Spec.Services, dup)
	errs := ValidateSpec(&obj.Spec, field.NewPath("spec"))
	if len(errs) != 1 {
		t.Fatalf("errors = %v", errs)
	}
	msg := errs[0].Error()
	for _, want := range []string{"spec.services[3]", "spec.services[2]", "nodePort 30443", `"edge"`, "weight 9 instead of 5"} {
		if !strings.Contains(msg, want) {
			t.Errorf("%q does not mention %q", msg, want)
		}
	}
}

// A resource with N distinct mistakes yields N causes: validation never stops
// at the first one.
func TestEveryMistakeIsReported(t *testing.T) {
	obj := validHub("a")
	s := &obj.Spec
	s.LoadBalancerID = "ocid1.instance.oc1..x"                     // 1
	s.APIKey.User = "alice"                                        // 2
	s.APIKey.Tenancy = ""                                          // 3
	s.APIKey.Region = "Tokyo"                                      // 4
	s.APIKey.Fingerprint = "ab"                                    // 5
	s.APIKey.PrivateKey.Namespace = ""                             // 6
	s.APIKey.PrivateKey.SecretKeyRef.Key = ""                      // 7
	s.Services[0].Port = servicePort(intstr.FromInt32(0))          // 8
	s.Services[0].Weight = 0                                       // 9
	s.Services[1].BackendSetName = "bad name"                      // 10
	s.Services[1].Namespace = ""                                   // 11
	s.Services[2].NodePort = 99999                                 // 12
	s.Services = append(s.Services, s.Services[2])                 // 13 (and the copy's own nodePort: 14)
	s.APIKey.Passphrase = &v1beta1.SecretKeySource{Namespace: "x"} // 15, 16
	const n = 16

	errs, _ := ValidateCreate(obj)
	if len(errs) != n {
		t.Fatalf("got %d causes, want %d:\n%v", len(errs), n, errs.ToAggregate())
	}
}
