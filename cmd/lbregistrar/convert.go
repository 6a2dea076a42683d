package main

import (
	"errors"
	"fmt"
	"io"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"

	"github.com/peppy-ratio/lbregistrar/api/v1alpha1"
)

func newConvertCommand() *cobra.Command {
	var files []string
	var to string
	var lossless bool
	cmd := &cobra.Command{
		Use:   "convert -f FILE|DIR|- --to v1beta1|v1alpha1",
		Short: "Print LBRegistrar manifests converted to another API version",
		Long: `Converts every LBRegistrar in the given files exactly as the API server's
conversion webhook does, and prints them as YAML documents. Other kinds are left
out. By default the annotations that keep a version's exact shape for the way back
are dropped, so the output reads as if written in the target version; with
--lossless they are kept. Nothing is printed when a document cannot be read.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if to != "v1beta1" && to != "v1alpha1" {
				return fmt.Errorf("--to must be v1beta1 or v1alpha1, not %q", to)
			}
			set, err := readManifests(files, cmd.InOrStdin())
			if err != nil {
				return err
			}
			if err := set.readError(); err != nil {
				return err
			}
			objs := make([]runtime.Object, 0, len(set.manifests))
			for i := range set.manifests {
				objs = append(objs, convertManifest(&set.manifests[i], to, lossless))
			}
			return writeYAML(cmd.OutOrStdout(), objs)
		},
	}
	cmd.Flags().StringArrayVarP(&files, "filename", "f", nil, "file, directory or - (stdin) to read; repeatable")
	cmd.Flags().StringVar(&to, "to", "", "target API version: v1beta1 or v1alpha1")
	cmd.Flags().BoolVar(&lossless, "lossless", false, "keep the conversion annotations that restore the source version's exact shape")
	_ = cmd.MarkFlagRequired("filename")
	_ = cmd.MarkFlagRequired("to")
	return cmd
}

// readError joins the errors of the documents that could not be read.
func (s *manifestSet) readError() error {
	errs := make([]error, 0, len(s.errs))
	for _, e := range s.errs {
		errs = append(errs, e)
	}
	return errors.Join(errs...)
}

// convertManifest converts m to version to as the conversion webhook does.
func convertManifest(m *manifest, to string, lossless bool) runtime.Object {
	hub := m.toHub()
	if to == "v1beta1" {
		if !lossless && m.alpha != nil {
			delete(hub.Annotations, v1alpha1.AlphaSpecAnnotation)
		}
		return hub
	}
	if m.alpha != nil {
		return m.alpha
	}
	alpha := &v1alpha1.LBRegistrar{}
	v1alpha1.FromHub(hub, alpha)
	if !lossless {
		delete(alpha.Annotations, v1alpha1.HubDataAnnotation)
	}
	return alpha
}

// writeYAML prints objects as YAML documents, without the empty status and
// null creationTimestamp a typed object always carries.
func writeYAML(w io.Writer, objs []runtime.Object) error {
	ew := &errWriter{w: w}
	for i, obj := range objs {
		raw, err := yaml.Marshal(tidy(obj))
		if err != nil {
			return err
		}
		if i > 0 {
			ew.printf("---\n")
		}
		ew.printf("%s", raw)
	}
	return ew.err
}

// tidy is obj as a map without the fields that were never set.
func tidy(obj runtime.Object) map[string]any {
	u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		panic(err) // only LBRegistrar types reach here
	}
	if meta, ok := u["metadata"].(map[string]any); ok {
		if meta["creationTimestamp"] == nil {
			delete(meta, "creationTimestamp")
		}
		if annotations, ok := meta["annotations"].(map[string]any); ok && len(annotations) == 0 {
			delete(meta, "annotations")
		}
	}
	if status, ok := u["status"].(map[string]any); ok && len(status) == 0 {
		delete(u, "status")
	}
	return u
}
