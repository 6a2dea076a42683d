package e2e

import (
	"net"
	"testing"

	"github.com/peppy-ratio/lbregistrar/test/kube"
)

// serve given port 0 for every listener reports, in --addresses-file, the
// 127.0.0.1 port each one got, and serves there: the probes, the webhooks
// (the API server admits and converts through the address reported) and the
// metrics, which count those webhook requests. kube.ServeProcess fails on a
// report that lacks a listener, so a report seen was whole.
func TestServeListensWhereItReports(t *testing.T) {
	t.Parallel()
	c := kube.Start(t, kube.Options{Bare: true})
	kubectl(t, c, "", "create", "namespace", kube.Namespace)

	serve := newServeProcess()
	serve.startInstalled(t, c, c.Kubeconfig, nil, "--webhook-host=127.0.0.1", "--secret-namespaces="+kube.Namespace)
	ports := map[string]string{}
	for listener, addr := range map[string]string{"webhook": serve.WebhookAddr, "health": serve.HealthAddr, "metrics": serve.MetricsAddr} {
		host, port, err := net.SplitHostPort(addr)
		if err != nil || host != "127.0.0.1" || port == "0" || ports[port] != "" {
			t.Errorf("%s reported at %q (%v); ports taken: %v", listener, addr, err, ports)
		}
		ports[port] = listener
	}

	serve.waitReady(t)
	if err := c.WaitAdmitting(testContext(t)); err != nil {
		t.Fatal(err)
	}
	serve.assertMetrics(t,
		`lbregistrar_webhook_requests_total{code="200",path="/convert"}`,
		`lbregistrar_webhook_requests_total{code="200",path="/validate-nodes-peppy-ratio-dev-v1alpha1-lbregistrar"}`)
}
