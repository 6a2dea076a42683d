package main

import (
	"cmp"
	"context"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/oracle/oci-go-sdk/v65/common"
	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/peppy-ratio/lbregistrar/api/v1beta1"
	"github.com/peppy-ratio/lbregistrar/reconciler"
	"github.com/peppy-ratio/lbregistrar/reconciler/oci"
	"github.com/peppy-ratio/lbregistrar/reconciler/preview"
	"github.com/peppy-ratio/lbregistrar/webhook"
)

// exitChangesPending is plan's exit status, with --detailed-exitcode, when
// the controller would write.
const exitChangesPending = exitStatus(2)

// errPlanIncomplete makes plan exit 1 once the report is printed.
var errPlanIncomplete = errors.New("some backend sets could not be planned")

type planOptions struct {
	kubeconfig       string
	output           string
	detailedExitCode bool
	deletion         bool
	ociConfig        string
	profile          string
	keyless          bool
	reconciler       reconciler.Options
}

func newPlanCommand() *cobra.Command {
	o := planOptions{reconciler: reconciler.DefaultOptions()}
	cmd := &cobra.Command{
		Use:   "plan --kubeconfig FILE [NAME...]",
		Short: "Show what the controller would write to each backend set, writing nothing",
		Long: `Reads the LBRegistrars (all, or those named), the nodes, Services and
EndpointSlices from the cluster and the backend sets from OCI, decides and plans
with the controller's own code, and prints per load balancer and backend set
what would be added, removed, re-weighted and kept (backends that are not the
resource's own are kept), and the conditions each resource would get. It writes
nothing to OCI or the cluster, and needs only read access (LBRegistrars, nodes,
Services, EndpointSlices, and the API keys' Secrets unless --oci-config is given).
As serve, it reads API keys only in --secret-namespaces (by default --namespace,
where serve runs): a resource whose Secret is elsewhere is planned as serve
would find it, SecretNamespaceNotAllowed, and the exit status is 1.

Before lbregistrar's CRD is installed it reads the original operator's v1alpha1
objects and converts them as the conversion webhook will: with no ownership
record yet, every backend the controller wants that is already registered is
taken over as it is, so "no change" means the switch writes nothing.

Give serve's --require-ready-nodes and OCI endpoint flags to plan what that
serve would do. With --detailed-exitcode the exit status is 0 when nothing
would be written, 2 when writes are pending and 1 on error.

With --delete it plans deleting the resources instead: which backends would be
drained and then removed, or that they would be kept (deletionPolicy Orphan, a
suspended resource).

Resources that sign in without an API key (workloadIdentity, instancePrincipal)
are planned only with --keyless, run where serve runs and as its ServiceAccount
(config/plan-job is that Job): plan then signs them in as serve would, with
serve's --workload-identity-host, --workload-identity-ca-file and
--allow-controller-identity. Without it they are IdentityUnsupported.`,
		RunE: func(cmd *cobra.Command, names []string) error {
			// serve reads API keys in its own namespace unless told
			// otherwise: so does a plan of what it would do.
			if !cmd.Flags().Changed("secret-namespaces") {
				o.reconciler.SecretNamespaces = []string{o.reconciler.RecordKey.Namespace}
			}
			return o.run(cmd.Context(), cmd.OutOrStdout(), cmd.ErrOrStderr(), names)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.kubeconfig, "kubeconfig", "", "kubeconfig file; $KUBECONFIG or in-cluster configuration when empty")
	f.StringVarP(&o.output, "output", "o", "text", "text or json")
	f.BoolVar(&o.detailedExitCode, "detailed-exitcode", false, "exit 0 when nothing would be written, 2 when writes are pending, 1 on error")
	f.BoolVar(&o.deletion, "delete", false, "plan deleting the resources: what would be drained and removed, or kept")
	f.StringVar(&o.ociConfig, "oci-config", "", "sign OCI calls with the API key of this OCI config file instead of each resource's Secret (the region stays the resource's)")
	f.StringVar(&o.profile, "profile", "DEFAULT", "profile of --oci-config")
	f.BoolVar(&o.keyless, "keyless", false, "also sign in resources without an API key, as serve does: run in the cluster as lbregistrar's ServiceAccount (config/plan-job)")
	cmd.MarkFlagsMutuallyExclusive("keyless", "oci-config")
	f.StringVar(&o.reconciler.RecordKey.Namespace, "namespace", o.reconciler.RecordKey.Namespace,
		"namespace lbregistrar runs in: the key its ownership records are signed with is read there, to tell its records from forged ones")
	o.reconciler.BindPlanFlags(f)
	return cmd
}

// planReport is what plan prints; its JSON form is for pipelines.
type planReport struct {
	LBRegistrars []reconciler.ResourcePlan `json:"lbregistrars"`
	// PendingWrites counts the backend sets that would be written.
	PendingWrites int `json:"pendingWrites"`
	// Skipped are resources being deleted, which this does not plan.
	Skipped []string `json:"skipped,omitempty"`
	// Unrecorded are backends in the backend sets planned that no
	// LBRegistrar of this cluster records and that are none of its nodes:
	// what a lost cluster, a person or another tool left there.
	Unrecorded []reconciler.Unrecorded `json:"unrecorded,omitempty"`
}

func (o *planOptions) run(ctx context.Context, stdout, stderr io.Writer, names []string) error {
	if o.output != "text" && o.output != "json" {
		return fmt.Errorf("--output must be text or json, not %q", o.output)
	}
	var apiKey *oci.Credentials
	if o.ociConfig != "" {
		var err error
		if apiKey, err = apiKeyFromConfig(o.ociConfig, o.profile); err != nil {
			return err
		}
	}
	cfg, err := restConfig(o.kubeconfig)
	if err != nil {
		return err
	}
	c, err := clientFor(cfg)
	if err != nil {
		return err
	}
	all, err := listRegistrars(ctx, c)
	if err != nil {
		return err
	}
	chosen, err := named(all, names)
	if err != nil {
		return err
	}
	if o.keyless {
		// Signing in as the controller is allowed only for the identity
		// serve runs as: the one this plan runs as, if it runs as serve.
		if o.reconciler.ControllerUser, err = webhook.WhoAmI(ctx, c); err != nil {
			return err
		}
	}
	planner, err := reconciler.NewPlanner(c, o.reconciler, apiKey)
	if err != nil {
		return err
	}
	if o.keyless {
		if err := planner.SignInAsTheController(cfg, c); err != nil {
			return err
		}
	}
	report := planReport{LBRegistrars: []reconciler.ResourcePlan{}}
	incomplete := false
	for _, obj := range chosen {
		if !obj.DeletionTimestamp.IsZero() {
			report.Skipped = append(report.Skipped, obj.Name)
			continue
		}
		planOf := planner.Plan
		if o.deletion {
			planOf = planner.PlanDeletion
		}
		rp, err := planOf(ctx, &obj, all)
		if err != nil {
			return fmt.Errorf("planning LBRegistrar %s: %w", obj.Name, err)
		}
		incomplete = incomplete || rp.Error != ""
		for _, c := range rp.BackendSets {
			incomplete = incomplete || c.Error != ""
			if c.Changed() {
				report.PendingWrites++
			}
		}
		report.LBRegistrars = append(report.LBRegistrars, rp)
	}
	if report.Unrecorded, err = planner.Unrecorded(ctx, report.LBRegistrars, all); err != nil {
		return err
	}
	if o.output == "json" {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		err = enc.Encode(report)
	} else {
		err = report.writeText(stdout)
	}
	for _, name := range report.Skipped {
		fmt.Fprintf(stderr, "LBRegistrar %s is being deleted: not planned\n", name)
	}
	switch {
	case err != nil:
		return err
	case incomplete:
		return errPlanIncomplete
	case o.detailedExitCode && report.PendingWrites > 0:
		return exitChangesPending
	}
	return nil
}

// named picks the resources names lists, in that order; all without names.
func named(all []v1beta1.LBRegistrar, names []string) ([]v1beta1.LBRegistrar, error) {
	if len(names) == 0 {
		return all, nil
	}
	var chosen []v1beta1.LBRegistrar
	for _, name := range names {
		i := slices.IndexFunc(all, func(o v1beta1.LBRegistrar) bool { return o.Name == name })
		if i < 0 {
			return nil, fmt.Errorf("LBRegistrar %s not found", name)
		}
		chosen = append(chosen, all[i])
	}
	return chosen, nil
}

// writeText prints the plan by load balancer, then resource, then backend set.
func (r *planReport) writeText(w io.Writer) error {
	ew := &errWriter{w: w}
	plans := slices.Clone(r.LBRegistrars)
	slices.SortStableFunc(plans, func(a, b reconciler.ResourcePlan) int {
		return cmp.Or(cmp.Compare(a.LoadBalancerID, b.LoadBalancerID), cmp.Compare(a.LBRegistrar, b.LBRegistrar))
	})
	unchanged := 0
	for i, rp := range plans {
		if i == 0 || rp.LoadBalancerID != plans[i-1].LoadBalancerID {
			ew.printf("load balancer %s\n", rp.LoadBalancerID)
		}
		ew.printf("  LBRegistrar %s\n", rp.LBRegistrar)
		if rp.Error != "" {
			ew.printf("    cannot read its backend sets: %s\n", rp.Error)
		}
		if rp.RecordIgnored != "" {
			ew.printf("    ownership record ignored (%s): planned as if there were none, so nothing it lists is removed\n", rp.RecordIgnored)
		}
		switch {
		case rp.Deletion != "":
			ew.printf("    deleted, its backends would be %s\n", rp.Deletion)
		case rp.Suspended:
			ew.printf("    suspended: nothing is written until spec.suspend is lifted\n")
		}
		if rp.DeletionPolicy == v1beta1.DeletionPolicyOrphan && rp.Deletion == "" {
			ew.printf("    deletionPolicy Orphan: deleting it leaves its backends registered\n")
		}
		for _, c := range rp.BackendSets {
			if !c.Changed() && c.Error == "" && !c.NotFound {
				unchanged++
			}
			writeBackendSet(ew, &c, rp.Deletion != "")
		}
		for _, cond := range rp.Conditions {
			if cond.Type == v1beta1.ConditionReady || cond.Status == metav1.ConditionTrue && cond.Type != v1beta1.ConditionReconciling {
				ew.printf("    %s=%s %s: %s\n", cond.Type, cond.Status, cond.Reason, cond.Message)
			}
		}
	}
	if len(r.Unrecorded) > 0 {
		ew.printf("Not recorded by any LBRegistrar of this cluster, and none of its nodes (lbregistrar leaves them; remove what no other cluster or tool registered):\n")
		for _, u := range r.Unrecorded {
			ew.printf("  %s %s %s weight %d\n", u.LoadBalancerID, u.BackendSet, u.Backend, u.Weight)
		}
	}
	if r.PendingWrites == 0 {
		ew.printf("No changes: %d backend set(s) already have what lbregistrar would register.\n", unchanged)
	} else {
		ew.printf("Plan: %d backend set(s) to write, %d unchanged.\n", r.PendingWrites, unchanged)
	}
	return ew.err
}

// modeNotes says what a mode other than apply means for a backend set.
var modeNotes = map[string]string{"hold": ", held (what is registered stays)", "retire": ", no longer in the spec"}

// writeBackendSet prints c, of a plan of the resource's deletion when
// deletion is set.
func writeBackendSet(ew *errWriter, c *preview.BackendSetChange, deletion bool) {
	head := "    backend set " + c.BackendSet
	if !deletion {
		head += modeNotes[c.Mode]
	}
	switch {
	case c.Error != "":
		ew.printf("%s: cannot be read: %s\n", head, c.Error)
		return
	case c.NotFound:
		ew.printf("%s: not found in the load balancer\n", head)
		return
	case c.Changed():
		ew.printf("%s: %s\n", head, c.Summary())
	default:
		ew.printf("%s: no change\n", head)
	}
	for _, b := range c.Added {
		ew.printf("      + %s weight %d\n", b.Backend, b.Weight)
	}
	for _, b := range c.Removed {
		ew.printf("      - %s weight %d\n", b.Backend, b.Weight)
	}
	for _, b := range c.Reweighted {
		ew.printf("      ~ %s weight %d -> %d\n", b.Backend, b.From, b.To)
	}
	for _, b := range c.Restored {
		ew.printf("      ~ %s weight %d: drained or offline -> serving\n", b.Backend, b.Weight)
	}
	for _, b := range c.Draining {
		verb := "drained"
		if b.Starts {
			verb = "serving -> drained"
		}
		ew.printf("      ~ %s weight %d: %s (node gone) until %s, then removed\n", b.Backend, b.Weight, verb, b.Until.UTC().Format(time.RFC3339))
	}
	for _, b := range c.Withheld {
		ew.printf("      ! %s withheld: OCI lets the backend set have %d backends; added once others leave\n", b, c.Limit)
	}
	for _, b := range c.Kept {
		if b.Foreign {
			ew.printf("        %s weight %d (not this resource's)\n", b.Backend, b.Weight)
		} else {
			ew.printf("        %s weight %d\n", b.Backend, b.Weight)
		}
	}
}

// apiKeyFromConfig reads the API key of a profile of an OCI config file
// (the SDK's format: user, fingerprint, tenancy, key_file, pass_phrase).
// The region is not taken: each resource names its load balancer's.
func apiKeyFromConfig(path, profile string) (*oci.Credentials, error) {
	provider, err := common.ConfigurationProviderFromFileWithProfile(path, profile, "")
	if err != nil {
		return nil, fmt.Errorf("--oci-config %s: %w", path, err)
	}
	var creds oci.Credentials
	for _, field := range []struct {
		value *string
		read  func() (string, error)
	}{{&creds.Tenancy, provider.TenancyOCID}, {&creds.User, provider.UserOCID}, {&creds.Fingerprint, provider.KeyFingerprint}} {
		if *field.value, err = field.read(); err != nil {
			return nil, fmt.Errorf("--oci-config %s, profile %s: %w", path, profile, err)
		}
	}
	key, err := provider.PrivateRSAKey()
	if err != nil {
		return nil, fmt.Errorf("--oci-config %s, profile %s: %w", path, profile, err)
	}
	creds.PrivateKey = pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)})
	return &creds, nil
}
