package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/peppy-ratio/lbregistrar/api/v1alpha1"
	"github.com/peppy-ratio/lbregistrar/api/v1beta1"
	"github.com/peppy-ratio/lbregistrar/api/validation"
)

// errInvalid makes the command exit non-zero once the report is printed.
var errInvalid = errors.New("validation failed")

func newValidateCommand() *cobra.Command {
	var files []string
	var output, kubeconfig string
	cmd := &cobra.Command{
		Use:   "validate -f FILE|DIR|- ...",
		Short: "Check LBRegistrar manifests with the admission webhook's rules",
		Long: `Checks every LBRegistrar in the given YAML or JSON files with the same rules the
admission webhook applies, offline. With --kubeconfig, each resource is also
checked against the cluster: as an update of the resource of the same name, and
for backend sets another LBRegistrar already claims. Kinds of other groups are
skipped; any other kind of this group is an error. Documents that cannot be
read are listed first. The exit code is non-zero when any resource is invalid
or a document cannot be read.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if output != "text" && output != "json" {
				return fmt.Errorf("--output must be text or json, not %q", output)
			}
			set, err := readManifests(files, cmd.InOrStdin())
			if err != nil {
				return err
			}
			var live []v1beta1.LBRegistrar
			if kubeconfig != "" {
				if live, err = listLive(cmd.Context(), kubeconfig); err != nil {
					return err
				}
			}
			report := validateManifests(set, live, kubeconfig != "")
			if output == "json" {
				err = report.writeJSON(cmd.OutOrStdout())
			} else {
				err = report.writeText(cmd.OutOrStdout())
			}
			if err != nil {
				return err
			}
			if report.Invalid > 0 || report.Unreadable > 0 {
				return errInvalid
			}
			return nil
		},
	}
	cmd.Flags().StringArrayVarP(&files, "filename", "f", nil, "file, directory or - (stdin) to read; repeatable")
	cmd.Flags().StringVarP(&output, "output", "o", "text", "text or json")
	cmd.Flags().StringVar(&kubeconfig, "kubeconfig", "", "also check against the cluster of this kubeconfig")
	_ = cmd.MarkFlagRequired("filename")
	return cmd
}

// listLive reads every LBRegistrar of the cluster, as v1beta1.
func listLive(ctx context.Context, kubeconfig string) ([]v1beta1.LBRegistrar, error) {
	c, err := liveClient(kubeconfig)
	if err != nil {
		return nil, err
	}
	return listRegistrars(ctx, c)
}

// liveClient connects to the cluster with the core types and every
// LBRegistrar version known.
func liveClient(kubeconfig string) (client.Client, error) {
	cfg, err := restConfig(kubeconfig)
	if err != nil {
		return nil, err
	}
	return clientFor(cfg)
}

// clientFor is a client of cfg's cluster with the core types and every
// LBRegistrar version known.
func clientFor(cfg *rest.Config) (client.Client, error) {
	return client.New(cfg, client.Options{Scheme: newScheme()})
}

// listRegistrars reads every LBRegistrar, as v1beta1. A cluster where only
// the original operator's CRD is installed serves v1alpha1 alone; its
// objects are converted here as the conversion webhook will convert them.
func listRegistrars(ctx context.Context, c client.Reader) ([]v1beta1.LBRegistrar, error) {
	var list v1beta1.LBRegistrarList
	err := c.List(ctx, &list)
	if err == nil {
		return list.Items, nil
	}
	if !meta.IsNoMatchError(err) {
		return nil, fmt.Errorf("listing LBRegistrars: %w", err)
	}
	var original v1alpha1.LBRegistrarList
	if err := c.List(ctx, &original); err != nil {
		return nil, fmt.Errorf("listing LBRegistrars (v1alpha1, no v1beta1 is served): %w", err)
	}
	hubs := make([]v1beta1.LBRegistrar, len(original.Items))
	for i := range original.Items {
		v1alpha1.ToHub(&original.Items[i], &hubs[i])
	}
	return hubs, nil
}

// validationReport is what validate prints; its JSON form is for CI.
type validationReport struct {
	Results    []validationResult `json:"results"`
	Valid      int                `json:"valid"`
	Invalid    int                `json:"invalid"`
	Unreadable int                `json:"unreadable"`
	Skipped    int                `json:"skipped"`
}

type validationResult struct {
	position
	APIVersion string    `json:"apiVersion,omitempty"`
	Name       string    `json:"name,omitempty"`
	Valid      bool      `json:"valid"`
	Errors     []problem `json:"errors,omitempty"`
	Warnings   []string  `json:"warnings,omitempty"`
}

// problem is one error: the field, the rule it broke and the message.
type problem struct {
	Field   string `json:"field,omitempty"`
	Rule    string `json:"rule"`
	Message string `json:"message"`
}

// ruleParse marks documents that could not be read.
const ruleParse = "parse"

// validateManifests checks each manifest as a create, or, when live has a
// resource of the same name, as an update of it. Claims are checked against
// live resources only when checkClaims is set.
func validateManifests(set *manifestSet, live []v1beta1.LBRegistrar, checkClaims bool) *validationReport {
	report := &validationReport{Skipped: set.skipped}
	// Documents that could not be read come first: a report of many
	// resources must not bury them.
	for _, e := range set.errs {
		report.Unreadable++
		report.Results = append(report.Results, validationResult{position: e.position,
			Errors: []problem{{Rule: ruleParse, Message: e.err.Error()}}})
	}
	liveByName := map[string]*v1beta1.LBRegistrar{}
	claimIndex := map[string][]v1beta1.LBRegistrar{}
	for i := range live {
		liveByName[live[i].Name] = &live[i]
		for _, key := range validation.ClaimKeys(&live[i].Spec) {
			claimIndex[key] = append(claimIndex[key], live[i])
		}
	}
	for i := range set.manifests {
		m := &set.manifests[i]
		var claimants []v1beta1.LBRegistrar
		if checkClaims {
			seen := map[string]bool{}
			for _, key := range validation.ClaimKeys(&m.toHub().Spec) {
				for _, c := range claimIndex[key] {
					if !seen[c.Name] {
						seen[c.Name] = true
						claimants = append(claimants, c)
					}
				}
			}
		}
		errs, warnings := validateManifest(m, liveByName[m.name()], claimants)
		res := validationResult{position: m.position, APIVersion: m.apiVersion(), Name: m.name(), Valid: len(errs) == 0, Warnings: warnings}
		for _, e := range errs {
			res.Errors = append(res.Errors, problem{Field: e.Field, Rule: e.Origin, Message: e.Error()})
		}
		if res.Valid {
			report.Valid++
		} else {
			report.Invalid++
		}
		report.Results = append(report.Results, res)
	}
	return report
}

// validateManifest runs the admission webhook's checks on one manifest.
func validateManifest(m *manifest, old *v1beta1.LBRegistrar, claimants []v1beta1.LBRegistrar) (field.ErrorList, []string) {
	if m.alpha == nil {
		return validation.ValidateWrite(m.hub, old, claimants)
	}
	var oldAlpha *validation.Alpha
	if old != nil {
		spoke := &v1alpha1.LBRegistrar{}
		v1alpha1.FromHub(old, spoke)
		oldAlpha = validation.NewAlpha(spoke)
	}
	return validation.ValidateV1alpha1Write(validation.NewAlpha(m.alpha), oldAlpha, claimants)
}

func (r *validationReport) writeJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

func (r *validationReport) writeText(w io.Writer) error {
	ew := &errWriter{w: w}
	for _, res := range r.Results {
		switch {
		case res.Name == "" && res.APIVersion == "":
			ew.printf("%s: %s\n", res.where(), res.Errors[0].Message)
			continue
		case res.Valid:
			ew.printf("%s: LBRegistrar %s (%s): valid\n", res.where(), res.Name, res.APIVersion)
		default:
			ew.printf("%s: LBRegistrar %s (%s): %d error(s)\n", res.where(), res.Name, res.APIVersion, len(res.Errors))
		}
		for _, p := range res.Errors {
			ew.printf("  error: %s [%s]\n", p.Message, p.Rule)
		}
		for _, warning := range res.Warnings {
			ew.printf("  warning: %s\n", warning)
		}
	}
	ew.printf("%d LBRegistrar(s): %d valid, %d invalid; %d document(s) unreadable; %d other object(s) skipped\n",
		r.Valid+r.Invalid, r.Valid, r.Invalid, r.Unreadable, r.Skipped)
	return ew.err
}

// errWriter keeps the first write error, so printing code stays linear.
type errWriter struct {
	w   io.Writer
	err error
}

func (e *errWriter) printf(format string, args ...any) {
	if e.err == nil {
		_, e.err = fmt.Fprintf(e.w, format, args...)
	}
}
