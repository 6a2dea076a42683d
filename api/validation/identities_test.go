package validation

import (
	"testing"

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
