package status_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	kstatus "sigs.k8s.io/cli-utils/pkg/kstatus/status"

	"github.com/peppy-ratio/lbregistrar/api/v1beta1"
	"github.com/peppy-ratio/lbregistrar/reconciler/desired"
	"github.com/peppy-ratio/lbregistrar/reconciler/oci"
	"github.com/peppy-ratio/lbregistrar/reconciler/status"
	"github.com/peppy-ratio/lbregistrar/test/gitops"
)

// Every state, alone and beside others, read by the real kstatus library
// and by the shipped Argo CD health check: the two agree, a person's fault
// fails whatever else is wrong, a retried one is in progress, Degraded
// beside Ready is healthy, a pause keeps the verdict it had (Argo CD: at
// once Suspended), deleting is terminating, and a spec not yet seen is in
// progress.
func TestToolsAgreeOnEveryState(t *testing.T) {
	conflict := func(o *status.Outcome) { o.Lost = map[string]string{"web": "older"} }
	held := func(o *status.Outcome) {
		o.Issues = []desired.Issue{{Reason: v1beta1.ReasonServiceNotFound, Message: `Service "shop/web" not found`}}
		o.Held = []string{"api"}
	}
	retried := func(o *status.Outcome) { o.Fail("admin", ociErr(409, "Conflict")) }
	refused := func(o *status.Outcome) {
		o.Refused("admin", 2, ociErr(400, "InvalidParameter"), time.Now().Add(time.Minute))
	}
	unusable := func(reason string) func(o *status.Outcome) {
		return func(o *status.Outcome) { o.Unusable = &status.Failure{Reason: reason, Message: reason + " message"} }
	}
	missingLB := func(o *status.Outcome) {
		err := ociErr(404, "NotAuthorizedOrNotFound")
		err.LoadBalancerMissing = true
		o.Missing("load balancer not found, or the identity may not read it: check the IAM policy", err)
	}
	unhealthy := func(o *status.Outcome) { o.Unhealthy = []string{`backend set "web": 1 of 3 CRITICAL`} }
	dryRun := func(o *status.Outcome) { o.Pending = []string{"web: 1 added"} }
	phase := func(reason, message string) func(o *status.Outcome) {
		return func(o *status.Outcome) { o.Phase = &status.Failure{Reason: reason, Message: message} }
	}
	writing := phase(v1beta1.ReasonRegistering, "writing backend sets api")

	cases := []struct {
		name  string
		parts []func(*status.Outcome)
		edit  func(*v1beta1.LBRegistrar) // after the reconcile
		want  kstatus.Status
		argo  string // when it is not the one kstatus's verdict agrees with
		says  string
	}{
		{name: "registered", want: kstatus.CurrentStatus},
		{name: "conflict", parts: parts(conflict), want: kstatus.FailedStatus, says: "belongs to LBRegistrar older"},
		{name: "conflict and held", parts: parts(held, conflict), want: kstatus.FailedStatus, says: "belongs to LBRegistrar older"},
		{name: "conflict and a retried write", parts: parts(retried, conflict), want: kstatus.FailedStatus, says: "belongs to LBRegistrar older"},
		{name: "conflict and a sign-in under way", parts: parts(unusable(v1beta1.ReasonSigningIn), conflict), want: kstatus.FailedStatus, says: "belongs to LBRegistrar older"},
		{name: "refused and retried", parts: parts(retried, refused), want: kstatus.FailedStatus, says: "OCI refused adding 2 backends"},
		{name: "retried write", parts: parts(retried), want: kstatus.InProgressStatus, says: "409 Conflict"},
		{name: "held", parts: parts(held), want: kstatus.InProgressStatus, says: "keep their registered backends"},
		{name: "sign-in under way", parts: parts(unusable(v1beta1.ReasonSigningIn)), want: kstatus.InProgressStatus, says: "SigningIn message"},
		{name: "ServiceAccount missing", parts: parts(unusable(v1beta1.ReasonServiceAccountNotFound)), want: kstatus.FailedStatus, says: "ServiceAccountNotFound message"},
		{name: "ServiceAccount not listed", parts: parts(unusable(v1beta1.ReasonServiceAccountNotListed)), want: kstatus.FailedStatus, says: "ServiceAccountNotListed message"},
		{name: "region not set", parts: parts(unusable(v1beta1.ReasonRegionNotSet)), want: kstatus.FailedStatus, says: "RegionNotSet message"},
		{name: "IAM policy missing", parts: parts(missingLB), want: kstatus.FailedStatus, says: "check the IAM policy"},
		{name: "IAM policy missing and held", parts: parts(held, missingLB), want: kstatus.FailedStatus, says: "check the IAM policy"},
		{name: "ready and degraded", parts: parts(unhealthy), want: kstatus.CurrentStatus},
		{name: "ready, degraded by the cluster", parts: parts(func(o *status.Outcome) {
			o.Issues = []desired.Issue{{Reason: v1beta1.ReasonNodeWithoutAddress, Message: "node a has no address"}}
		}), want: kstatus.CurrentStatus},
		{name: "dry run", parts: parts(dryRun), want: kstatus.InProgressStatus, says: "dry run"},
		{name: "spec not seen yet", edit: func(o *v1beta1.LBRegistrar) { o.Generation++ }, want: kstatus.InProgressStatus},
		{name: "spec not seen yet, conflict", parts: parts(conflict), edit: func(o *v1beta1.LBRegistrar) { o.Generation++ }, want: kstatus.InProgressStatus},
		{name: "deleting", parts: parts(conflict), edit: func(o *v1beta1.LBRegistrar) {
			o.DeletionTimestamp = &metav1.Time{Time: time.Now()}
		}, want: kstatus.TerminatingStatus},
		{name: "moving", parts: parts(phase(v1beta1.ReasonMoving, "draining in the old load balancer")),
			want: kstatus.InProgressStatus, says: "draining in the old load balancer"},
		{name: "moving, refused", parts: parts(refused), want: kstatus.FailedStatus, says: "OCI refused"},
		{name: "writing beside a conflict", parts: parts(conflict, writing),
			want: kstatus.FailedStatus, says: "belongs to LBRegistrar older"},
		{name: "writing", parts: parts(writing), want: kstatus.InProgressStatus, says: "writing backend sets api"},

		{name: "suspended when ready", edit: suspend, want: kstatus.CurrentStatus, argo: "Suspended", says: ""},
		{name: "suspended while registering", parts: parts(writing), edit: suspend, want: kstatus.InProgressStatus, argo: "Suspended"},
		{name: "suspended in conflict", parts: parts(conflict), edit: suspend, want: kstatus.FailedStatus, argo: "Suspended"},
		{name: "created suspended", edit: func(o *v1beta1.LBRegistrar) {
			o.Status = v1beta1.LBRegistrarStatus{}
			suspend(o)
		}, want: kstatus.CurrentStatus, argo: "Suspended"},
		{name: "suspend not seen yet", edit: func(o *v1beta1.LBRegistrar) {
			o.Spec.Suspend = true
			o.Generation++
		}, want: kstatus.InProgressStatus, argo: "Suspended", says: ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			obj := &v1beta1.LBRegistrar{
				TypeMeta:   metav1.TypeMeta{APIVersion: v1beta1.GroupVersion.String(), Kind: "LBRegistrar"},
				ObjectMeta: metav1.ObjectMeta{Name: "shop", Generation: 4},
			}
			var out status.Outcome
			for _, part := range tc.parts {
				part(&out)
			}
			obj.Status.ObservedGeneration = obj.Generation
			status.SetConditions(obj, &out)
			if tc.edit != nil {
				tc.edit(obj)
			}
			raw, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
			if err != nil {
				t.Fatal(err)
			}
			v, err := gitops.Read(&unstructured.Unstructured{Object: raw})
			if err != nil {
				t.Fatal(err)
			}
			if v.KStatus != tc.want {
				t.Errorf("%s; want kstatus %s", v, tc.want)
			}
			if tc.argo != "" {
				if v.Argo != tc.argo {
					t.Errorf("%s; want Argo CD %s", v, tc.argo)
				}
			} else if !v.Agree() {
				t.Errorf("%s: the tools disagree", v)
			}
			if tc.says != "" && (!strings.Contains(v.KMessage, tc.says) || !strings.Contains(v.ArgoMessage, tc.says)) {
				t.Errorf("%s; want both to say %q", v, tc.says)
			}
		})
	}
}

func parts(p ...func(*status.Outcome)) []func(*status.Outcome) { return p }

// suspend is the reconcile of spec.suspend: true.
func suspend(o *v1beta1.LBRegistrar) {
	o.Spec.Suspend = true
	o.Generation++
	o.Status.ObservedGeneration = o.Generation
	status.SetSuspended(o)
}

func ociErr(code int, name string) *oci.Error {
	return &oci.Error{Op: "UpdateBackendSet", Status: code, Code: name, Err: errors.New(name)}
}
