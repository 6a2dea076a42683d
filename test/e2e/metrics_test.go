package e2e

import (
	"crypto/tls"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/peppy-ratio/lbregistrar/test/kube"
)

// With --metrics-secure, as the Deployment runs it, /metrics and
// /debug/lanes are served over HTTPS, and only to callers the API server
// authenticates and authorizes: a request with no token is refused, a token
// of a ServiceAccount bound to lbregistrar-metrics-reader is answered, and
// one of a ServiceAccount without that binding is forbidden. serve runs as
// its own ServiceAccount with the shipped RBAC, so the grants for asking the
// API server are shown to be enough.
func TestMetricsServedOnlyToAuthorizedCallers(t *testing.T) {
	t.Parallel()
	c := kube.Start(t, kube.Options{Bare: true})
	ctx := testContext(t)
	kubectl(t, c, "", "create", "namespace", kube.Namespace)
	serve := newServeProcess()
	serve.SecureMetrics = true
	kubeconfig, err := c.ServiceAccountKubeconfig(ctx)
	if err != nil {
		t.Fatal(err)
	}
	serve.startInstalled(t, c, kubeconfig, nil, "--cert-mode=builtin", "--webhook-host=127.0.0.1", "--secret-namespaces="+kube.Namespace)
	serve.waitReady(t)

	kubectl(t, c, "", "-n", kube.Namespace, "create", "serviceaccount", "scraper")
	kubectl(t, c, "", "-n", kube.Namespace, "create", "serviceaccount", "stranger")
	kubectl(t, c, "", "create", "clusterrolebinding", "scraper-lbregistrar-metrics",
		"--clusterrole=lbregistrar-metrics-reader", "--serviceaccount="+kube.Namespace+":scraper")
	token := func(serviceAccount string) string { // through the TokenRequest API
		out, _ := kubectl(t, c, "", "-n", kube.Namespace, "create", "token", serviceAccount)
		return strings.TrimSpace(out)
	}
	scraper, stranger := token("scraper"), token("stranger")

	// The certificate is one serve made for itself at start.
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	for path, content := range map[string]string{"/metrics": "lbregistrar_pending_changes", "/debug/lanes": `"leader"`} {
		for _, tc := range []struct {
			who, token string
			want       int
		}{
			{"no token", "", http.StatusUnauthorized},
			{"the token of a ServiceAccount bound to lbregistrar-metrics-reader", scraper, http.StatusOK},
			{"the token of a ServiceAccount without that binding", stranger, http.StatusForbidden},
		} {
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, "https://"+serve.MetricsAddr+path, nil)
			if err != nil {
				t.Fatal(err)
			}
			if tc.token != "" {
				req.Header.Set("Authorization", "Bearer "+tc.token)
			}
			resp, err := client.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, err := io.ReadAll(resp.Body)
			_ = resp.Body.Close()
			if err != nil {
				t.Fatal(err)
			}
			if resp.StatusCode != tc.want {
				t.Errorf("GET %s with %s: %s, want %d", path, tc.who, resp.Status, tc.want)
			}
			if tc.want == http.StatusOK && !strings.Contains(string(body), content) {
				t.Errorf("GET %s with %s: no %s in\n%s", path, tc.who, content, body)
			}
		}
	}

	resp, err := http.Get("http://" + serve.MetricsAddr + "/metrics")
	if err == nil {
		_ = resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			t.Error("/metrics answered over plain HTTP")
		}
	}
}
