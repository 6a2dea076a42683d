package main

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/spf13/cobra"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/peppy-ratio/lbregistrar/reconciler"
)

func newMigrateStorageCommand() *cobra.Command {
	var kubeconfig, crdName string
	cmd := &cobra.Command{
		Use:   "migrate-storage",
		Short: "Rewrite every LBRegistrar in the storage version and drop older stored versions",
		Long: `Rewrite every LBRegistrar unchanged, so the API server stores each one in the
CRD's storage version (v1beta1), then record that version as the only one in
the CRD's status.storedVersions. Run it once after upgrading from the v1alpha1
operator, with the webhooks serving; it is safe to run again or to interrupt.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := restConfig(kubeconfig)
			if err != nil {
				return err
			}
			c, err := client.New(cfg, client.Options{Scheme: migrationScheme()})
			if err != nil {
				return err
			}
			return migrateStorage(cmd.Context(), c, crdName, cmd.OutOrStdout())
		},
	}
	cmd.Flags().StringVar(&kubeconfig, "kubeconfig", "", "kubeconfig file; in-cluster configuration or $KUBECONFIG when empty")
	cmd.Flags().StringVar(&crdName, "crd", reconciler.CRDName, "CRD to migrate")
	return cmd
}

func migrationScheme() *runtime.Scheme {
	s := runtime.NewScheme()
	utilruntime.Must(apiextensionsv1.AddToScheme(s))
	return s
}

// migrateStorage rewrites every object of the CRD through the API server in
// its storage version, then sets status.storedVersions to that version
// alone. Objects are read and written as unstructured data, so nothing the
// schema keeps is dropped on the way.
func migrateStorage(ctx context.Context, c client.Client, crdName string, out io.Writer) error {
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := c.Get(ctx, client.ObjectKey{Name: crdName}, crd); err != nil {
		return err
	}
	storage := ""
	for _, v := range crd.Spec.Versions {
		if v.Storage {
			storage = v.Name
		}
	}
	if storage == "" {
		return fmt.Errorf("CRD %s has no storage version", crdName)
	}
	gvk := schema.GroupVersionKind{Group: crd.Spec.Group, Version: storage, Kind: crd.Spec.Names.ListKind}

	rewritten := 0
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(gvk)
	for {
		if err := c.List(ctx, list, client.Limit(250), client.Continue(list.GetContinue())); err != nil {
			return fmt.Errorf("listing %s: %w", crd.Spec.Names.Plural, err)
		}
		for i := range list.Items {
			if err := rewrite(ctx, c, &list.Items[i]); err != nil {
				return err
			}
			rewritten++
		}
		if list.GetContinue() == "" {
			break
		}
	}

	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := c.Get(ctx, client.ObjectKey{Name: crdName}, crd); err != nil {
			return err
		}
		crd.Status.StoredVersions = []string{storage}
		return c.Status().Update(ctx, crd)
	})
	if err != nil {
		return fmt.Errorf("updating status.storedVersions of %s: %w", crdName, err)
	}
	_, err = fmt.Fprintf(out, "rewrote %d %s in %s; stored versions: [%s]\n", rewritten, crd.Spec.Names.Plural, storage, storage)
	return err
}

// rewrite writes obj back unchanged, which makes the API server encode it in
// the storage version. A conflict or a deletion means someone else wrote or
// removed it since it was listed, which serves as well.
func rewrite(ctx context.Context, c client.Client, obj *unstructured.Unstructured) error {
	err := c.Update(ctx, obj)
	if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return errors.Join(fmt.Errorf("rewriting %s", obj.GetName()), err)
	}
	return nil
}
