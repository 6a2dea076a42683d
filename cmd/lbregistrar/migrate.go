package main

import (
	"errors"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/peppy-ratio/lbregistrar/api/v1beta1"
	"github.com/peppy-ratio/lbregistrar/api/validation"
)

func newMigrateCommand() *cobra.Command {
	var files []string
	var kubeconfig string
	cmd := &cobra.Command{
		Use:   "migrate (-f FILE|DIR|- ... | --kubeconfig FILE)",
		Short: "Merge LBRegistrars into one v1beta1 resource per load balancer",
		Long: `Reads LBRegistrars (any version) from files or from a cluster, groups them by
load balancer, and prints one v1beta1 LBRegistrar per load balancer with all
their targets. A merged resource names the ones it replaces in the
` + validation.ReplacesAnnotation + ` annotation, so it can be applied while they
still exist and takes their backends over without deregistering them; delete the
old ones once it is Ready (see docs/migration.md).

Resources that cannot be merged (different identities or node selectors for one
load balancer, or targets that register one backend with two settings) are
reported on stderr, printed nowhere, and make the exit code non-zero.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if (len(files) == 0) == (kubeconfig == "") {
				return errors.New("give either -f or --kubeconfig")
			}
			var hubs []v1beta1.LBRegistrar
			if kubeconfig != "" {
				live, err := listLive(cmd.Context(), kubeconfig)
				if err != nil {
					return err
				}
				hubs = live
			} else {
				set, err := readManifests(files, cmd.InOrStdin())
				if err != nil {
					return err
				}
				if err := set.readError(); err != nil {
					return err
				}
				for i := range set.manifests {
					hubs = append(hubs, *set.manifests[i].toHub())
				}
			}
			merged, problems := migrate(hubs)
			objs := make([]runtime.Object, 0, len(merged))
			for i := range merged {
				objs = append(objs, &merged[i])
			}
			if err := writeYAML(cmd.OutOrStdout(), objs); err != nil {
				return err
			}
			return reportProblems(cmd.ErrOrStderr(), problems)
		},
	}
	cmd.Flags().StringArrayVarP(&files, "filename", "f", nil, "file, directory or - (stdin) to read; repeatable")
	cmd.Flags().StringVar(&kubeconfig, "kubeconfig", "", "read the LBRegistrars of the cluster of this kubeconfig")
	return cmd
}

func reportProblems(w io.Writer, problems []string) error {
	if len(problems) == 0 {
		return nil
	}
	ew := &errWriter{w: w}
	for _, p := range problems {
		ew.printf("not merged: %s\n", p)
	}
	if ew.err != nil {
		return ew.err
	}
	return fmt.Errorf("%d load balancer(s) could not be merged", len(problems))
}

// migrate merges resources per load balancer. It returns the merged
// resources, in load balancer order, and one problem per load balancer whose
// resources could not be merged.
func migrate(objs []v1beta1.LBRegistrar) ([]v1beta1.LBRegistrar, []string) {
	byLB := map[string][]*v1beta1.LBRegistrar{}
	names := map[string]bool{}
	for i := range objs {
		byLB[objs[i].Spec.LoadBalancerID] = append(byLB[objs[i].Spec.LoadBalancerID], &objs[i])
		names[objs[i].Name] = true
	}
	lbs := make([]string, 0, len(byLB))
	for lb := range byLB {
		lbs = append(lbs, lb)
	}
	slices.Sort(lbs)

	var merged []v1beta1.LBRegistrar
	var problems []string
	for _, lb := range lbs {
		group := byLB[lb]
		slices.SortFunc(group, func(a, b *v1beta1.LBRegistrar) int { return strings.Compare(a.Name, b.Name) })
		obj, err := mergeGroup(group, names)
		if err != nil {
			problems = append(problems, fmt.Sprintf("load balancer %s (%s): %v", lb, groupNames(group, ", "), err))
			continue
		}
		merged = append(merged, *obj)
	}
	return merged, problems
}

// mergeGroup merges the resources of one load balancer, sorted by name.
func mergeGroup(group []*v1beta1.LBRegistrar, taken map[string]bool) (*v1beta1.LBRegistrar, error) {
	first := group[0]
	for _, o := range group[1:] {
		if !validation.SameIdentity(&o.Spec, &first.Spec) {
			return nil, fmt.Errorf("%s and %s sign in to OCI differently (%s, %s); a load balancer is written with one identity",
				first.Name, o.Name, first.Spec.Identity(), o.Spec.Identity())
		}
		if !equality.Semantic.DeepEqual(o.Spec.NodeSelector, first.Spec.NodeSelector) {
			return nil, fmt.Errorf("%s and %s select different nodes (spec.nodeSelector)", first.Name, o.Name)
		}
	}

	out := &v1beta1.LBRegistrar{
		TypeMeta: metav1.TypeMeta{APIVersion: v1beta1.GroupVersion.String(), Kind: "LBRegistrar"},
		Spec: v1beta1.LBRegistrarSpec{
			LoadBalancerID:    first.Spec.LoadBalancerID,
			APIKey:            first.Spec.APIKey.DeepCopy(),
			WorkloadIdentity:  first.Spec.WorkloadIdentity.DeepCopy(),
			InstancePrincipal: first.Spec.InstancePrincipal.DeepCopy(),
			NodeSelector:      first.Spec.NodeSelector.DeepCopy(),
		},
	}
	// origin records where each merged target came from, for messages.
	var origin []string
	for _, o := range group {
		for i := range o.Spec.Services {
			t := o.Spec.Services[i]
			if slices.ContainsFunc(out.Spec.Services, func(u v1beta1.Target) bool { return equality.Semantic.DeepEqual(u, t) }) {
				continue // the same target in two resources: one is enough
			}
			out.Spec.Services = append(out.Spec.Services, t)
			origin = append(origin, fmt.Sprintf("%s spec.services[%d]", o.Name, i))
		}
	}
	if errs := validation.ValidateSpec(&out.Spec, field.NewPath("spec")); len(errs) > 0 {
		return nil, mergedErrors(errs, origin)
	}

	if len(group) == 1 {
		out.ObjectMeta = metav1.ObjectMeta{Name: first.Name, Labels: first.Labels}
		return out, nil
	}
	out.Name = mergedName(group, taken)
	out.Annotations = map[string]string{validation.ReplacesAnnotation: groupNames(group, ",")}
	return out, nil
}

var targetPath = regexp.MustCompile(`spec\.services\[(\d+)\]`)

// mergedErrors explains validation errors of a merged spec in terms of the
// resources its targets came from.
func mergedErrors(errs field.ErrorList, origin []string) error {
	msgs := make([]string, 0, len(errs))
	for _, e := range errs {
		msgs = append(msgs, targetPath.ReplaceAllStringFunc(e.Error(), func(path string) string {
			i, _ := strconv.Atoi(targetPath.FindStringSubmatch(path)[1])
			return origin[i]
		}))
	}
	return errors.New(strings.Join(msgs, "; "))
}

// mergedName is the group's common name prefix, cut at a '-' boundary
// ("app-https" and "app-http" give "app"), or the first name with "-merged"
// when there is none or another resource already uses it.
func mergedName(group []*v1beta1.LBRegistrar, taken map[string]bool) string {
	prefix := group[0].Name
	for _, o := range group[1:] {
		for !strings.HasPrefix(o.Name, prefix) {
			prefix = prefix[:len(prefix)-1]
		}
	}
	for prefix != "" && slices.ContainsFunc(group, func(o *v1beta1.LBRegistrar) bool {
		return len(o.Name) <= len(prefix) || o.Name[len(prefix)] != '-'
	}) {
		prefix = prefix[:max(strings.LastIndex(prefix, "-"), 0)]
	}
	if prefix != "" && !taken[prefix] {
		return prefix
	}
	name := group[0].Name + "-merged"
	for n := 2; taken[name]; n++ {
		name = fmt.Sprintf("%s-merged-%d", group[0].Name, n)
	}
	return name
}

func groupNames(group []*v1beta1.LBRegistrar, sep string) string {
	names := make([]string, 0, len(group))
	for _, o := range group {
		names = append(names, o.Name)
	}
	return strings.Join(names, sep)
}
