package validation

import (
	"testing"

	"github.com/peppy-ratio/lbregistrar/api/v1alpha1"
	"github.com/peppy-ratio/lbregistrar/api/v1beta1"
)

func TestControllerIdentity(t *testing.T) {
	const controller = "system:serviceaccount:lbregistrar-system:lbregistrar"
	named := func(namespace, name string) v1beta1.LBRegistrarSpec {
		return v1beta1.LBRegistrarSpec{WorkloadIdentity: &v1beta1.WorkloadIdentity{ServiceAccount: &v1beta1.ServiceAccountReference{Namespace: namespace, Name: name}}}
	}
	for _, tc := range []struct {
		name       string
		spec       v1beta1.LBRegistrarSpec
		controller string
		want       string
	}{
		{"an API key", v1beta1.LBRegistrarSpec{APIKey: &v1beta1.APIKey{}}, controller, "<nil>"},
		{"the instance principal", v1beta1.LBRegistrarSpec{InstancePrincipal: &v1beta1.InstancePrincipal{}}, controller, "spec.instancePrincipal"},
		{"a workload identity naming no ServiceAccount", v1beta1.LBRegistrarSpec{WorkloadIdentity: &v1beta1.WorkloadIdentity{}}, controller, "spec.workloadIdentity"},
		{"the controller's ServiceAccount named", named("lbregistrar-system", "lbregistrar"), controller, "spec.workloadIdentity.serviceAccount"},
		{"a namesake in another namespace", named("team-a", "lbregistrar"), controller, "<nil>"},
		{"another ServiceAccount", named("lbregistrar-system", "lb-writer"), controller, "<nil>"},
		{"a controller that is no ServiceAccount", named("lbregistrar-system", "lbregistrar"), "admin", "<nil>"},
	} {
		if got := ControllerIdentity(&tc.spec, tc.controller).String(); got != tc.want {
			t.Errorf("%s: %s, want %s", tc.name, got, tc.want)
		}
	}
}

func TestServiceAccountOf(t *testing.T) {
	for user, want := range map[string]string{
		"system:serviceaccount:lbregistrar-system:lbregistrar": "lbregistrar-system/lbregistrar",
		"system:serviceaccount:ns":                             "",
		"system:serviceaccount::name":                          "",
		"system:serviceaccount:ns:name:extra":                  "",
		"admin":                                                "",
	} {
		sa, ok := ServiceAccountOf(user)
		if got := map[bool]string{true: sa.String(), false: ""}[ok]; got != want {
			t.Errorf("%q: %q, want %q", user, got, want)
		}
	}
}

func TestUncheckedIdentity(t *testing.T) {
	ofServiceAccount := v1beta1.LBRegistrarSpec{WorkloadIdentity: &v1beta1.WorkloadIdentity{ServiceAccount: &v1beta1.ServiceAccountReference{Namespace: "team-a", Name: "lb-writer"}}}
	marked := func(identity string) map[string]string {
		return map[string]string{v1alpha1.UncheckedIdentityAnnotation: identity}
	}
	for _, tc := range []struct {
		name        string
		annotations map[string]string
		spec        v1beta1.LBRegistrarSpec
		want        string
	}{
		{"a marked ServiceAccount", marked("workload identity of service account team-a/lb-writer"), ofServiceAccount, "spec.workloadIdentity.serviceAccount"},
		{"the controller's, marked", marked("workload identity of the controller's service account"), v1beta1.LBRegistrarSpec{WorkloadIdentity: &v1beta1.WorkloadIdentity{}}, "spec.workloadIdentity"},
		{"the instance, marked", marked("instance principal"), v1beta1.LBRegistrarSpec{InstancePrincipal: &v1beta1.InstancePrincipal{}}, "spec.instancePrincipal"},
		{"unmarked", nil, ofServiceAccount, "<nil>"},
		{"marked for another identity, since changed", marked("workload identity of service account team-a/old"), ofServiceAccount, "<nil>"},
		{"an API key", marked("API key of user u fingerprint f"), v1beta1.LBRegistrarSpec{APIKey: &v1beta1.APIKey{User: "u", Fingerprint: "f"}}, "<nil>"},
	} {
		if got := UncheckedIdentity(tc.annotations, &tc.spec).String(); got != tc.want {
			t.Errorf("%s: %s, want %s", tc.name, got, tc.want)
		}
	}
}
