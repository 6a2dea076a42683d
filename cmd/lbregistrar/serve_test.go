package main

import (
	"os"
	"path/filepath"
	"testing"
)

// serve reaches the API server with the same client-side limits whether the
// cluster is found through --kubeconfig or the environment: none by
// default, as controller-runtime has it, or those of its flags.
func TestServeConnectionLimits(t *testing.T) {
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	err := os.WriteFile(kubeconfig, []byte(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:6443"}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: c, context: {cluster: c, user: u}}]
current-context: c
`), 0o600)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name      string
		args      []string
		env       string
		wantQPS   float32
		wantBurst int
	}{
		{"flag, defaults", []string{"--kubeconfig", kubeconfig}, "", -1, -1},
		{"environment, defaults", nil, kubeconfig, -1, -1},
		{"flag, limits", []string{"--kubeconfig", kubeconfig, "--kube-api-qps", "50", "--kube-api-burst", "100"}, "", 50, 100},
		{"environment, limits", []string{"--kube-api-qps", "50", "--kube-api-burst", "100"}, kubeconfig, 50, 100},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv("KUBECONFIG", tt.env)
			o := newServeOptions()
			if err := o.command().ParseFlags(tt.args); err != nil {
				t.Fatal(err)
			}
			cfg, err := o.restConfig()
			if err != nil {
				t.Fatal(err)
			}
			if cfg.QPS != tt.wantQPS || cfg.Burst != tt.wantBurst {
				t.Errorf("QPS %v, burst %d; want %v, %d", cfg.QPS, cfg.Burst, tt.wantQPS, tt.wantBurst)
			}
		})
	}
	// Without serve's limits, the one-shot commands get no client-side
	// limit from a file either (client-go's default would be 5 per second).
	cfg, err := restConfig(kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.QPS >= 0 {
		t.Errorf("restConfig(file): QPS %v, want no client-side limit", cfg.QPS)
	}
}
