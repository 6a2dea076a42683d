package kube

import (
	"context"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// CABundles returns the CA bundle of the CRD's conversion webhook followed
// by that of every validating webhook, as the API server has them now.
func (c *Cluster) CABundles(ctx context.Context) ([][]byte, error) {
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := c.Client.Get(ctx, client.ObjectKey{Name: CRDName}, crd); err != nil {
		return nil, err
	}
	var bundles [][]byte
	if conv := crd.Spec.Conversion; conv != nil && conv.Webhook != nil && conv.Webhook.ClientConfig != nil {
		bundles = append(bundles, conv.Webhook.ClientConfig.CABundle)
	} else {
		bundles = append(bundles, nil)
	}
	vwc := &admissionregistrationv1.ValidatingWebhookConfiguration{}
	if err := c.Client.Get(ctx, client.ObjectKey{Name: ValidatingWebhook}, vwc); err != nil {
		return nil, err
	}
	for _, w := range vwc.Webhooks {
		bundles = append(bundles, w.ClientConfig.CABundle)
	}
	return bundles, nil
}
