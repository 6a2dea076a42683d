package main

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	"sigs.k8s.io/yaml"
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

// The shipped Deployment gives serve more time than its graceful shutdown
// takes, so the kubelet never kills it while it records the last write.
func TestDeploymentOutlastsTheShutdown(t *testing.T) {
	data, err := os.ReadFile("../../config/manager/deployment.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var deployment appsv1.Deployment
	if err := yaml.UnmarshalStrict(data, &deployment); err != nil {
		t.Fatal(err)
	}
	pod := deployment.Spec.Template.Spec
	o := newServeOptions()
	if err := o.command().ParseFlags(pod.Containers[0].Args[1:]); err != nil {
		t.Fatal(err)
	}
	grace := time.Duration(*pod.TerminationGracePeriodSeconds) * time.Second
	if grace <= o.shutdownTimeout || o.shutdownTimeout <= shutdownReserve {
		t.Errorf("terminationGracePeriodSeconds %s, --graceful-shutdown-timeout %s, reserve %s: each must exceed the next",
			grace, o.shutdownTimeout, shutdownReserve)
	}
}
