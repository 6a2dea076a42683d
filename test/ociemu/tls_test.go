package ociemu_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/oracle/oci-go-sdk/v65/common"
	"github.com/oracle/oci-go-sdk/v65/loadbalancer"

	"github.com/peppy-ratio/lbregistrar/test/ociemu"
)

// An SDK client with its default HTTP client reaches the HTTPS endpoint once
// OCI_DEFAULT_CERTS_PATH names the emulator's CA, and refuses it otherwise:
// the way to point an unmodified program (make run) at the emulator.
func TestDefaultClientTrustsCABundleFromEnvironment(t *testing.T) {
	f := newFixture(t, ociemu.Options{}, true)
	get := func() error {
		lb, err := loadbalancer.NewLoadBalancerClientWithConfigurationProvider(f.config)
		must(t, err)
		lb.Host = f.emu.HTTPSURL()
		_, err = lb.GetLoadBalancer(f.context, loadbalancer.GetLoadBalancerRequest{LoadBalancerId: common.String(classicID)})
		return err
	}
	if err := get(); err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Fatalf("a client without the CA connected: %v", err)
	}
	bundle := filepath.Join(t.TempDir(), "ca.pem")
	must(t, os.WriteFile(bundle, f.emu.CACertPEM(), 0o600))
	t.Setenv("OCI_DEFAULT_CERTS_PATH", bundle)
	must(t, get())
}
