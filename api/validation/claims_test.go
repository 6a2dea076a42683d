package validation

import (
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/peppy-ratio/lbregistrar/api/v1beta1"
)

func TestClaimKeys(t *testing.T) {
	obj := validHub("a")
	obj.Spec.Services[1].BackendSetName = "ingress" // shares a set with target 0
	got := ClaimKeys(&obj.Spec)
	want := []string{ClaimKey(testNLB, "ingress"), ClaimKey(testNLB, "edge")}
	if !slices.Equal(got, want) {
		t.Errorf("ClaimKeys = %q, want %q", got, want)
	}
	// The encoding is unambiguous even for values no valid object has.
	if ClaimKey("a/b", "c") == ClaimKey("a", "b/c") || ClaimKey(`a"`, "b") == ClaimKey("a", `"b`) {
		t.Error("two different claims share a key")
	}
}

func at(sec int64) metav1.Time { return metav1.NewTime(time.Unix(sec, 0)) }

func TestPrecedes(t *testing.T) {
	named := func(name string, created metav1.Time, replaces string) *v1beta1.LBRegistrar {
		obj := validHub(name)
		obj.CreationTimestamp = created
		if replaces != "" {
			obj.Annotations = map[string]string{ReplacesAnnotation: replaces}
		}
		return obj
	}
	tests := []struct {
		name string
		a, b *v1beta1.LBRegistrar
		want bool
	}{
		{"older wins", named("b", at(1), ""), named("a", at(2), ""), true},
		{"newer loses", named("a", at(2), ""), named("b", at(1), ""), false},
		{"same age: name", named("a", at(1), ""), named("b", at(1), ""), true},
		{"same age: name, reversed", named("b", at(1), ""), named("a", at(1), ""), false},
		{"replacement wins though newer", named("new", at(9), "x, old"), named("old", at(1), ""), true},
		{"replaced loses though older", named("old", at(1), ""), named("new", at(9), "old"), false},
		{"not yet created is newest", named("a", metav1.Time{}, ""), named("b", at(9), ""), false},
		{"created beats not yet created", named("b", at(9), ""), named("a", metav1.Time{}, ""), true},
		// A hand-over between identities may be forged: the newcomer gives way.
		{"replacement signing in otherwise loses", signingInOtherwise(named("new", at(9), "old")), named("old", at(1), ""), false},
		{"replaced keeps it from one signing in otherwise", named("old", at(1), ""), signingInOtherwise(named("new", at(9), "old")), true},
		// A resource created after its replacer took a freed name: the
		// annotation says nothing of it, and the older keeps the claim.
		{"a freed name taken again is not replaced", named("old", at(9), ""), named("new", at(1), "old"), false},
		{"a freed name taken again gives way to the older", signingInOtherwise(named("new", at(1), "old")), named("old", at(9), ""), true},
		{"created the same second: replaced", named("old", at(1), ""), named("new", at(1), "old"), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Precedes(tt.a, tt.b); got != tt.want {
				t.Errorf("Precedes = %v, want %v", got, tt.want)
			}
		})
	}
}

// signingInOtherwise is obj signing in with another API key Secret.
func signingInOtherwise(obj *v1beta1.LBRegistrar) *v1beta1.LBRegistrar {
	obj.Spec.APIKey.PrivateKey.SecretKeyRef.Name += "-other"
	return obj
}

func TestSameIdentity(t *testing.T) {
	spec := func(change func(*v1beta1.LBRegistrarSpec)) *v1beta1.LBRegistrarSpec {
		s := validHub("a").Spec.DeepCopy()
		change(s)
		return s
	}
	keyless := func(s *v1beta1.LBRegistrarSpec) {
		s.APIKey, s.WorkloadIdentity = nil, &v1beta1.WorkloadIdentity{Region: "ap-tokyo-1"}
	}
	for _, tc := range []struct {
		name string
		b    *v1beta1.LBRegistrarSpec
		want bool
	}{
		{"the same key, other targets", spec(func(s *v1beta1.LBRegistrarSpec) { s.Services = nil }), true},
		{"the same user and fingerprint in another Secret", spec(func(s *v1beta1.LBRegistrarSpec) { s.APIKey.PrivateKey.SecretKeyRef.Name = "other" }), false},
		{"another passphrase", spec(func(s *v1beta1.LBRegistrarSpec) {
			s.APIKey.Passphrase = &v1beta1.SecretKeySource{Namespace: "x", SecretKeyRef: v1beta1.SecretKeyRef{Name: "p", Key: "k"}}
		}), false},
		{"a workload identity", spec(keyless), false},
	} {
		if got := SameIdentity(&validHub("a").Spec, tc.b); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestValidateClaims(t *testing.T) {
	other := validHub("other")
	other.Spec.Services = other.Spec.Services[:1] // claims (NLB, ingress)
	other.CreationTimestamp = at(1)
	unrelated := validHub("unrelated")
	unrelated.Spec.LoadBalancerID = testLB

	t.Run("conflict names the other resource and the target", func(t *testing.T) {
		obj := validHub("a")
		errs := ValidateClaims(obj, []v1beta1.LBRegistrar{*unrelated, *other})
		checkFailures(t, errs, []failure{{"spec.services[0].backendSetName", RuleClaimConflict}})
		if msg := errs.ToAggregate().Error(); !strings.Contains(msg, `"other"`) || !strings.Contains(msg, "ingress") {
			t.Errorf("error %q should name the other resource and the backend set", msg)
		}
	})
	t.Run("every target in a contested set is reported", func(t *testing.T) {
		obj := validHub("a")
		obj.Spec.Services[1].BackendSetName = "ingress"
		errs := ValidateClaims(obj, []v1beta1.LBRegistrar{*other})
		checkFailures(t, errs, []failure{{"spec.services[0].backendSetName", RuleClaimConflict}, {"spec.services[1].backendSetName", RuleClaimConflict}})
	})
	t.Run("itself is not a conflict", func(t *testing.T) {
		obj := validHub("a")
		checkFailures(t, ValidateClaims(obj, []v1beta1.LBRegistrar{*obj}), nil)
	})
	t.Run("a replaced resource is not a conflict", func(t *testing.T) {
		obj := validHub("a")
		obj.Annotations = map[string]string{ReplacesAnnotation: "x,other"}
		checkFailures(t, ValidateClaims(obj, []v1beta1.LBRegistrar{*other}), nil)
	})
	t.Run("the resource that replaces it is not a conflict", func(t *testing.T) {
		replacer := other.DeepCopy()
		replacer.Annotations = map[string]string{ReplacesAnnotation: "a"}
		replaced := validHub("a")
		replaced.CreationTimestamp = at(0)
		checkFailures(t, ValidateClaims(replaced, []v1beta1.LBRegistrar{*replacer}), nil)
	})
	// The replaced resources were deleted, and someone takes one's name:
	// being named confers nothing on a resource newer than the replacement.
	t.Run("a freed name taken again is a conflict", func(t *testing.T) {
		replacer := other.DeepCopy()
		replacer.Annotations = map[string]string{ReplacesAnnotation: "a"}
		checkFailures(t, ValidateClaims(validHub("a"), []v1beta1.LBRegistrar{*replacer}), []failure{{"spec.services[0].backendSetName", RuleClaimConflict}})
		squatter := validHub("a")
		squatter.CreationTimestamp = at(2)
		checkFailures(t, ValidateClaims(squatter, []v1beta1.LBRegistrar{*replacer}), []failure{{"spec.services[0].backendSetName", RuleClaimConflict}})
	})
	t.Run("the same backend set on another load balancer is free", func(t *testing.T) {
		obj := validHub("a")
		obj.Spec.LoadBalancerID = testLB
		checkFailures(t, ValidateClaims(obj, []v1beta1.LBRegistrar{*other}), nil)
	})
	t.Run("the first claimant by name is named", func(t *testing.T) {
		second := other.DeepCopy()
		second.Name = "another"
		errs := ValidateClaims(validHub("a"), []v1beta1.LBRegistrar{*other, *second})
		if len(errs) != 1 || !strings.Contains(errs[0].Detail, `"another"`) {
			t.Errorf("errors = %v, want one naming \"another\"", errs)
		}
	})
	t.Run("v1alpha1 errors are on the v1alpha1 field", func(t *testing.T) {
		errs := ValidateV1alpha1Claims(NewAlpha(validAlpha("a")), []v1beta1.LBRegistrar{*other})
		checkFailures(t, errs, []failure{{"spec.backendSetName", RuleClaimConflict}})
	})
	t.Run("an overlap stored before is a warning on update", func(t *testing.T) {
		old := validHub("a")
		obj := old.DeepCopy()
		obj.Spec.Services[0].Weight = 3
		claimants := []v1beta1.LBRegistrar{*other}
		errs, warnings := Ratchet(ValidateClaims(obj, claimants), ValidateClaims(old, claimants))
		checkFailures(t, errs, nil)
		if len(warnings) != 1 {
			t.Errorf("warnings = %q, want one", warnings)
		}
	})
}
