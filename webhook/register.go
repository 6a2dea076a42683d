// Package webhook serves LBRegistrar admission and conversion over
// controller-runtime's webhook server. The handlers are thin: conversion is
// package conversion, validation is package validation.
package webhook

import (
	"context"
	"strings"

	"sigs.k8s.io/controller-runtime/pkg/manager"
	crconversion "sigs.k8s.io/controller-runtime/pkg/webhook/conversion"

	"github.com/peppy-ratio/lbregistrar/api/v1beta1"
	"github.com/peppy-ratio/lbregistrar/api/validation"
	"github.com/peppy-ratio/lbregistrar/conversion"
)

// Paths the API server calls; config/ and the tests point at them.
const (
	ConvertPath          = "/convert"
	ValidateV1alpha1Path = "/validate-nodes-peppy-ratio-dev-v1alpha1-lbregistrar"
	ValidateV1beta1Path  = "/validate-nodes-peppy-ratio-dev-v1beta1-lbregistrar"
)

// Register adds the conversion webhook and both validating webhooks to the
// manager's webhook server, and the validation.ClaimIndexField index, which
// the validating webhooks read through the manager's cache, to its field
// indexer. The reconciler may register the same index; either order works.
// secretNamespaces are the namespaces API keys are read from (serve
// --secret-namespaces; any when empty), see SecretPolicy.
func Register(mgr manager.Manager, secretNamespaces []string) error {
	converter, err := conversion.NewConverter(mgr.GetScheme())
	if err != nil {
		return err
	}
	if err := mgr.GetConverterRegistry().RegisterConverter(v1beta1.GroupVersion.WithKind("LBRegistrar").GroupKind(), converter); err != nil {
		return err
	}
	mgr.GetWebhookServer().Register(ConvertPath, crconversion.NewWebhookHandler(mgr.GetScheme(), mgr.GetConverterRegistry()))

	err = mgr.GetFieldIndexer().IndexField(context.Background(), &v1beta1.LBRegistrar{}, validation.ClaimIndexField, validation.IndexClaims)
	if err != nil && !strings.Contains(err.Error(), "indexer conflict") {
		return err
	}
	secrets := SecretPolicy{Namespaces: secretNamespaces, Reviewer: mgr.GetClient()}
	mgr.GetWebhookServer().Register(ValidateV1alpha1Path, NewV1alpha1Validator(mgr.GetCache(), secrets))
	mgr.GetWebhookServer().Register(ValidateV1beta1Path, NewV1beta1Validator(mgr.GetCache(), secrets))
	return nil
}
