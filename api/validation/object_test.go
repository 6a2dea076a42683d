package validation

import (
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/peppy-ratio/lbregistrar/api/v1alpha1"
	"github.com/peppy-ratio/lbregistrar/api/v1beta1"
)

// validAlpha is the seed's single-service v1alpha1 object, as stored (weight
// defaulted to 1).
func validAlpha(name string) *v1alpha1.LBRegistrar {
	obj := &v1alpha1.LBRegistrar{Spec: v1alpha1.LBRegistrarSpec{
		LoadBalancerID: testNLB,
		BackendSetName: "ingress",
		Weight:         1,
		Service:        &v1alpha1.ServiceSpec{Name: "istio-ingressgateway", Namespace: "istio-system", Port: intstr.FromString("https")},
		APIKey: v1alpha1.APIKeySpec{
			User: testUser, Tenancy: testTenancy, Fingerprint: testFP, Region: "ap-tokyo-1",
			PrivateKey: v1alpha1.SecretKeySpec{Namespace: "lbregistrar-system", SecretKeyRef: v1alpha1.SecretKeyRef{Name: "oci-api-key", Key: "private-key"}},
		},
	}}
	obj.Name = name
	return obj
}

func multiAlpha(spec *v1alpha1.LBRegistrarSpec) {
	spec.Service, spec.BackendSetName = nil, ""
	spec.Services = []v1alpha1.ServiceSpec{
		{Name: "istio-ingressgateway", Namespace: "istio-system", Port: intstr.FromString("https"), BackendSetName: "ingress", Weight: 1},
		{Name: "istio-ingressgateway", Namespace: "istio-system", Port: intstr.FromString("http2"), BackendSetName: "ingress-http"},
	}
}

const (
	warnService        = "spec.service is deprecated: use spec.services"
	warnBackendSetName = "spec.backendSetName is deprecated: use spec.services[].backendSetName"
	warnNodePort       = "spec.nodePort is deprecated: use spec.services[].nodePort in nodes.peppy-ratio.dev/v1beta1"
	warnPort           = "spec.port is deprecated: use spec.services[].nodePort in nodes.peppy-ratio.dev/v1beta1"
)

func TestValidateV1alpha1Create(t *testing.T) {
	tests := []struct {
		name     string
		mutate   func(*v1alpha1.LBRegistrarSpec)
		want     []failure
		warnings []string
	}{
		{"single service", func(*v1alpha1.LBRegistrarSpec) {}, nil, []string{warnService, warnBackendSetName}},
		{"services list", multiAlpha, nil, nil},
		{"fixed port", func(s *v1alpha1.LBRegistrarSpec) { s.Service, s.NodePort = nil, 30080 }, nil, []string{warnNodePort, warnBackendSetName}},
		{"port overrides nodePort", func(s *v1alpha1.LBRegistrarSpec) { s.Service, s.NodePort, s.Port = nil, 30080, 30081 }, nil,
			[]string{warnNodePort, warnPort, "spec.port (30081) overrides spec.nodePort (30080)", warnBackendSetName}},
		{"top-level weight", func(s *v1alpha1.LBRegistrarSpec) { s.Weight = 3 }, nil,
			[]string{warnService, "spec.weight is deprecated: use spec.services[].weight", warnBackendSetName}},
		{"top-level weight taken by a services item without its own", func(s *v1alpha1.LBRegistrarSpec) { multiAlpha(s); s.Weight = 3 }, nil,
			[]string{"spec.weight is deprecated: use spec.services[].weight"}},
		{"top-level weight beside services that all set their own", func(s *v1alpha1.LBRegistrarSpec) { multiAlpha(s); s.Services[1].Weight = 1; s.Weight = 3 }, nil,
			[]string{"spec.weight is ignored because every target sets its own weight: use spec.services[].weight"}},
		{"single service backend set is ignored", func(s *v1alpha1.LBRegistrarSpec) { s.Service.BackendSetName = "other" }, nil,
			[]string{warnService, `spec.service.backendSetName ("other") is ignored: a single service registers in spec.backendSetName ("ingress"), as the original operator did`, warnBackendSetName}},
		{"single service weight is ignored", func(s *v1alpha1.LBRegistrarSpec) { s.Weight, s.Service.Weight = 5, 3 }, nil,
			[]string{warnService, "spec.service.weight (3) is ignored: a single service registers with spec.weight (5), as the original operator did",
				"spec.weight is deprecated: use spec.services[].weight", warnBackendSetName}},
		{"single service weight at its schema default is not reported", func(s *v1alpha1.LBRegistrarSpec) { s.Weight, s.Service.Weight = 5, 1 }, nil,
			[]string{warnService, "spec.weight is deprecated: use spec.services[].weight", warnBackendSetName}},

		// Errors are reported on the field the user wrote.
		{"no target", func(s *v1alpha1.LBRegistrarSpec) { s.Service = nil }, []failure{{"spec.services", RuleTargetRequired}}, []string{warnBackendSetName}},
		{"single service without backend set", func(s *v1alpha1.LBRegistrarSpec) { s.BackendSetName = "" },
			[]failure{{"spec.backendSetName", RuleBackendSetName}}, []string{warnService}},
		{"ignored single service weight", func(s *v1alpha1.LBRegistrarSpec) { s.Service.Weight = 500 },
			[]failure{{"spec.service.weight", RuleWeight}}, []string{warnService,
				"spec.service.weight (500) is ignored: a single service registers with spec.weight (1), as the original operator did", warnBackendSetName}},
		{"single service weight taken when spec.weight is 0", func(s *v1alpha1.LBRegistrarSpec) { s.Weight, s.Service.Weight = 0, 500 },
			[]failure{{"spec.service.weight", RuleWeight}}, []string{warnService, warnBackendSetName}},
		{"weight a services item inherits", func(s *v1alpha1.LBRegistrarSpec) { multiAlpha(s); s.Weight = 500 },
			[]failure{{"spec.weight", RuleWeight}}, []string{"spec.weight is deprecated: use spec.services[].weight"}},
		{"ignored weight beside services", func(s *v1alpha1.LBRegistrarSpec) { multiAlpha(s); s.Services[1].Weight = 1; s.Weight = 500 },
			[]failure{{"spec.weight", RuleWeight}}, []string{"spec.weight is ignored because every target sets its own weight: use spec.services[].weight"}},
		{"inherited weight", func(s *v1alpha1.LBRegistrarSpec) { s.Weight = 500 },
			[]failure{{"spec.weight", RuleWeight}}, []string{warnService, "spec.weight is deprecated: use spec.services[].weight", warnBackendSetName}},
		{"negative weight", func(s *v1alpha1.LBRegistrarSpec) { s.Service.Weight = -1 },
			[]failure{{"spec.service.weight", RuleWeight}}, []string{warnService, warnBackendSetName}},
		{"single service port", func(s *v1alpha1.LBRegistrarSpec) { s.Service.Port = intstr.FromInt32(0) },
			[]failure{{"spec.service.port", RulePort}}, []string{warnService, warnBackendSetName}},
		{"fixed port out of range", func(s *v1alpha1.LBRegistrarSpec) { s.Service, s.Port = nil, 70000 },
			[]failure{{"spec.port", RulePort}}, []string{warnPort, warnBackendSetName}},
		{"services item inherits a bad backend set", func(s *v1alpha1.LBRegistrarSpec) {
			multiAlpha(s)
			s.Services[1].BackendSetName = ""
			s.BackendSetName = "bad name"
		}, []failure{{"spec.backendSetName", RuleBackendSetName}}, []string{warnBackendSetName}},
		{"services item namespace", func(s *v1alpha1.LBRegistrarSpec) { multiAlpha(s); s.Services[1].Namespace = "" },
			[]failure{{"spec.services[1].namespace", RuleServiceRef}}, nil},
		{"duplicate services items", func(s *v1alpha1.LBRegistrarSpec) { multiAlpha(s); s.Services = append(s.Services, s.Services[0]) },
			[]failure{{"spec.services[2]", RuleDuplicateTarget}}, nil},
		{"services mixed with service and port", func(s *v1alpha1.LBRegistrarSpec) {
			service := s.Service
			multiAlpha(s)
			s.Service, s.Port = service, 30080
		}, []failure{{"spec.service", RuleMixedTargets}, {"spec.port", RuleMixedTargets}}, []string{warnService, warnPort}},
		{"services mixed with nodePort", func(s *v1alpha1.LBRegistrarSpec) { multiAlpha(s); s.NodePort = 30080 },
			[]failure{{"spec.nodePort", RuleMixedTargets}}, []string{warnNodePort}},
		{"one services item too many", func(s *v1alpha1.LBRegistrarSpec) {
			multiAlpha(s)
			for port := range MaxTargets - 1 {
				s.Services = append(s.Services, v1alpha1.ServiceSpec{Name: "web", Namespace: "default", Port: intstr.FromInt(port + 1), BackendSetName: "web"})
			}
		}, []failure{{"spec.services", RuleTargetLimit}}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			obj := validAlpha("a")
			tt.mutate(&obj.Spec)
			errs, warnings := ValidateV1alpha1Create(NewAlpha(obj))
			checkFailures(t, errs, tt.want)
			if !slices.Equal(warnings, tt.warnings) {
				t.Errorf("warnings = %q, want %q", warnings, tt.warnings)
			}
		})
	}
}

func TestValidateV1alpha1UpdateKeepsMixedObjectsEditable(t *testing.T) {
	old := validAlpha("a")
	multiAlpha(&old.Spec)
	old.Spec.NodePort = 30080
	obj := old.DeepCopy()
	obj.Spec.Services[0].Weight = 7

	errs, warnings := ValidateV1alpha1Update(NewAlpha(obj), NewAlpha(old))
	if len(errs) != 0 {
		t.Fatalf("errors = %v", errs)
	}
	if !slices.ContainsFunc(warnings, func(w string) bool { return strings.HasPrefix(w, "spec.nodePort: Forbidden") }) {
		t.Errorf("warnings = %q, want the mixed nodePort as a warning", warnings)
	}
}

// A v1alpha1 client may edit a resource moving a Service port from node
// ports to pods: v1alpha1 shows the two targets alike, but they are no
// duplicates. Two targets of one type still are, and are reported on the
// v1alpha1 fields.
func TestValidateV1alpha1KeepsTargetTypesApart(t *testing.T) {
	hub := validHub("a")
	pods := hub.Spec.Services[0]
	pods.TargetType = v1beta1.TargetTypePod
	hub.Spec.Services = append(hub.Spec.Services[:2], pods) // no fixed port, which v1alpha1 could not show beside them
	var old v1alpha1.LBRegistrar
	v1alpha1.FromHub(hub, &old)
	obj := old.DeepCopy()
	obj.Spec.Services[2].Weight = 50 // the pods' target, third of the Service targets v1alpha1 shows

	errs, _ := ValidateV1alpha1Update(NewAlpha(obj), NewAlpha(&old))
	if len(errs) != 0 {
		t.Fatalf("errors = %v", errs)
	}
	obj.Spec.Services = append(obj.Spec.Services, obj.Spec.Services[1])
	errs, _ = ValidateV1alpha1Update(NewAlpha(obj), NewAlpha(&old))
	checkFailures(t, errs, []failure{{"spec.services[3]", RuleDuplicateTarget}})
}

func TestValidateUpdate(t *testing.T) {
	t.Run("load balancer is immutable", func(t *testing.T) {
		old := validHub("a")
		obj := old.DeepCopy()
		obj.Spec.LoadBalancerID = testLB
		errs, _ := ValidateUpdate(obj, old)
		checkFailures(t, errs, []failure{{"spec.loadBalancerId", RuleImmutable}})
		if !strings.Contains(errs[0].Error(), "immutable") || !strings.Contains(errs[0].Error(), testNLB) {
			t.Errorf("error %q should say the field is immutable and name the old value", errs[0])
		}
	})
	t.Run("load balancer is immutable through v1alpha1", func(t *testing.T) {
		old := validAlpha("a")
		obj := old.DeepCopy()
		obj.Spec.LoadBalancerID = testLB
		errs, _ := ValidateV1alpha1Update(NewAlpha(obj), NewAlpha(old))
		checkFailures(t, errs, []failure{{"spec.loadBalancerId", RuleImmutable}})
	})
	t.Run("targets, weights, backend sets and keys may change", func(t *testing.T) {
		old := validHub("a")
		obj := old.DeepCopy()
		obj.Spec.Services = obj.Spec.Services[1:]
		obj.Spec.Services[0].Weight = 50
		obj.Spec.Services[1].BackendSetName = "edge2"
		obj.Spec.APIKey.Fingerprint = "ff:34:56:78:9a:bc:de:f0:12:34:56:78:9a:bc:de:f0"
		errs, warnings := ValidateUpdate(obj, old)
		checkFailures(t, errs, nil)
		if len(warnings) != 0 {
			t.Errorf("warnings = %q", warnings)
		}
	})
	t.Run("an error already stored is a warning", func(t *testing.T) {
		old := validHub("a")
		old.Spec.APIKey.Region = "Tokyo"
		obj := old.DeepCopy()
		obj.Spec.Services[0].Weight = 2
		errs, warnings := ValidateUpdate(obj, old)
		checkFailures(t, errs, nil)
		if len(warnings) != 1 || !strings.Contains(warnings[0], "spec.apiKey.region") {
			t.Errorf("warnings = %q, want the region", warnings)
		}
	})
	t.Run("a faulty field that is edited is checked again", func(t *testing.T) {
		old := validHub("a")
		old.Spec.APIKey.Region = "Tokyo"
		obj := old.DeepCopy()
		obj.Spec.APIKey.Region = "Osaka"
		errs, _ := ValidateUpdate(obj, old)
		checkFailures(t, errs, []failure{{"spec.apiKey.region", RuleRegion}})
	})
}

// Conversion annotations may come back as read, never set or changed; the
// v1beta1 data may not be removed either, since its status would be lost.
// Removing the unchecked-identity mark is for the identity check to judge.
func TestValidateConversionAnnotations(t *testing.T) {
	hub, alpha, mark := v1alpha1.HubDataAnnotation, v1alpha1.AlphaSpecAnnotation, v1alpha1.UncheckedIdentityAnnotation
	tests := []struct {
		name        string
		annotations map[string]string
		stored      map[string]string
		refused     []string // annotation keys
	}{
		{"create without", map[string]string{"team": "a"}, nil, nil},
		{"create with v1beta1 data", map[string]string{hub: "{}"}, nil, []string{hub}},
		{"create with v1alpha1 spec", map[string]string{alpha: "{}"}, nil, []string{alpha}},
		{"update sending both back", map[string]string{hub: "x", alpha: "y"}, map[string]string{hub: "x", alpha: "y"}, nil},
		{"update changing v1beta1 data", map[string]string{hub: "x2"}, map[string]string{hub: "x"}, []string{hub}},
		{"update adding v1beta1 data", map[string]string{hub: "x"}, map[string]string{}, []string{hub}},
		{"update removing v1beta1 data", nil, map[string]string{hub: "x"}, []string{hub}},
		{"update changing v1alpha1 spec", map[string]string{alpha: "y2"}, map[string]string{alpha: "y"}, []string{alpha}},
		{"update removing v1alpha1 spec", nil, map[string]string{alpha: "y"}, nil},
		{"create marked", map[string]string{mark: "instance principal"}, nil, []string{mark}},
		{"update marking", map[string]string{mark: "instance principal"}, map[string]string{}, []string{mark}},
		{"update changing the mark", map[string]string{mark: "instance principal"}, map[string]string{mark: "workload identity of the controller's service account"}, []string{mark}},
		{"update keeping the mark", map[string]string{mark: "instance principal"}, map[string]string{mark: "instance principal"}, nil},
		{"update removing the mark", nil, map[string]string{mark: "instance principal"}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var refused []string
			for _, err := range ValidateConversionAnnotations(tt.annotations, tt.stored) {
				if err.Origin != RuleConversionAnnotation {
					t.Errorf("origin %q", err.Origin)
				}
				refused = append(refused, strings.TrimSuffix(strings.TrimPrefix(err.Field, "metadata.annotations["), "]"))
			}
			if !slices.Equal(refused, tt.refused) {
				t.Errorf("refused %q, want %q", refused, tt.refused)
			}
		})
	}
}
