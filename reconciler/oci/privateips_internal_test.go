package oci

import (
	"net/netip"
	"testing"
	"time"
)

// A listing answers while it is fresh and lists what is asked; an address
// it lacks has it listed again, but not sooner than privateIPsRelist.
func TestPrivateIPListingIsReusedWhileItAnswers(t *testing.T) {
	listed := time.Now()
	known, unknown := netip.MustParseAddr("10.1.0.1"), netip.MustParseAddr("10.1.0.2")
	cached := &instanceIPs{ips: PrivateIPs{known: "ocid1.privateip.oc1.iad.a"}, listedAt: listed}
	for _, tt := range []struct {
		name string
		want []netip.Addr
		age  time.Duration
		use  bool
	}{
		{"fresh, every address listed", []netip.Addr{known}, time.Minute, true},
		{"an address missing, listed moments ago", []netip.Addr{unknown}, privateIPsRelist - time.Second, true},
		{"an address missing", []netip.Addr{known, unknown}, privateIPsRelist, false},
		{"stale", []netip.Addr{known}, privateIPsFresh, false},
	} {
		if got := usable(cached, tt.want, listed.Add(tt.age)); got != tt.use {
			t.Errorf("%s: usable %v, want %v", tt.name, got, tt.use)
		}
	}
}
