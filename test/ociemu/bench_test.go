package ociemu_test

import (
	"testing"

	"github.com/oracle/oci-go-sdk/v65/common"
	"github.com/oracle/oci-go-sdk/v65/networkloadbalancer"

	"github.com/peppy-ratio/lbregistrar/test/ociemu"
)

// BenchmarkSDKRoundTrip is one signed SDK call against the emulator, over
// plain HTTP (baseline) and over HTTPS: what an emulator-backed test pays
// per OCI call.
func BenchmarkSDKRoundTrip(b *testing.B) {
	for _, op := range []struct {
		name string
		call func(b *testing.B, f *fixture)
	}{
		{"GetBackendSet", func(b *testing.B, f *fixture) {
			_, err := f.nlb.GetBackendSet(f.context, networkloadbalancer.GetBackendSetRequest{
				NetworkLoadBalancerId: common.String(networkID), BackendSetName: common.String("tcp")})
			must(b, err)
		}},
		{"UpdateBackendSet", func(b *testing.B, f *fixture) {
			_, err := f.nlb.UpdateBackendSet(f.context, f.emptyNetworkUpdate())
			must(b, err)
		}},
	} {
		for _, variant := range []struct {
			name   string
			useTLS bool
		}{{"baseline", false}, {"https", true}} {
			b.Run(op.name+"/"+variant.name, func(b *testing.B) {
				f := newFixture(b, ociemu.Options{}, variant.useTLS)
				op.call(b, f) // connection set up outside the timing
				b.ReportAllocs()
				b.ResetTimer()
				for b.Loop() {
					op.call(b, f)
				}
			})
		}
	}
}
