package main

import (
	"bufio"
	"context"
	"io"
	"path/filepath"
	"strings"
	"testing"

	"github.com/oracle/oci-go-sdk/v65/common"
	"github.com/oracle/oci-go-sdk/v65/networkloadbalancer"
)

// The binary's files are enough for an unmodified SDK client: the config
// file it writes, and its CA through OCI_DEFAULT_CERTS_PATH.
func TestRunServesWhatItPrints(t *testing.T) {
	dir := t.TempDir()
	ca := filepath.Join(dir, "ca.pem")
	ctx, cancel := context.WithCancel(context.Background())
	out, printed := io.Pipe()
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"-seed", "../../test/ociemu/testdata/seed.yaml", "-ca-out", ca, "-credentials-dir", dir}, printed)
		printed.Close()
	}()
	urls := map[string]string{}
	lines := bufio.NewScanner(out)
	for lines.Scan() {
		name, url, _ := strings.Cut(lines.Text(), " ")
		urls[name] = strings.TrimSpace(url)
		if name == "state" {
			break
		}
	}
	go func() { _, _ = io.Copy(io.Discard, out) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	}()
	if urls["https"] == "" {
		t.Fatalf("printed %v", urls)
	}

	t.Setenv("OCI_DEFAULT_CERTS_PATH", ca)
	config, err := common.ConfigurationProviderFromFile(filepath.Join(dir, "config"), "")
	if err != nil {
		t.Fatal(err)
	}
	nlb, err := networkloadbalancer.NewNetworkLoadBalancerClientWithConfigurationProvider(config)
	if err != nil {
		t.Fatal(err)
	}
	nlb.Host = urls["https"]
	resp, err := nlb.GetNetworkLoadBalancer(ctx, networkloadbalancer.GetNetworkLoadBalancerRequest{
		NetworkLoadBalancerId: common.String("ocid1.networkloadbalancer.oc1.iad.networkexample")})
	if err != nil {
		t.Fatal(err)
	}
	if *resp.DisplayName != "tcp-ingress" {
		t.Errorf("served %s", *resp.DisplayName)
	}
}

func TestRunRejectsBadSeed(t *testing.T) {
	if err := run(context.Background(), []string{"-seed", "nosuch.yaml"}, io.Discard); err == nil {
		t.Error("a missing seed file was accepted")
	}
}
