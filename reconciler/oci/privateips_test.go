package oci_test

import (
	"context"
	"errors"
	"net/netip"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/peppy-ratio/lbregistrar/reconciler/oci"
	"github.com/peppy-ratio/lbregistrar/test/ociemu"
)

// PrivateIPs lists every private IP of an instance's attached VNICs,
// every page, through the real SDK's Core Services clients, and reuses
// the listing until an address asked for is missing from it; an instance
// the identity may not read is OCI's 404.
func TestPrivateIPsOfAnInstance(t *testing.T) {
	ctx := context.Background()
	emu, c := emulatorClient(t, true)
	const instance = "ocid1.instance.oc1.iad.node"
	pods := []ociemu.PrivateIP{{IPAddress: "10.1.0.2"}}
	for i := range 60 { // more than a page
		pods = append(pods, ociemu.PrivateIP{ID: "ocid1.privateip.oc1.iad.pod" + netip.AddrFrom4([4]byte{10, 1, 1, byte(i)}).String(), IPAddress: netip.AddrFrom4([4]byte{10, 1, 1, byte(i)}).String()})
	}
	if err := emu.SeedState(ociemu.Seed{Instances: []ociemu.Instance{{ID: instance, CompartmentID: "ocid1.compartment.oc1..nodes", VNICs: []ociemu.VNIC{
		{PrivateIPs: []ociemu.PrivateIP{{ID: "ocid1.privateip.oc1.iad.primary", IPAddress: "10.0.0.2"}}},
		{PrivateIPs: pods},
	}}}}); err != nil {
		t.Fatal(err)
	}
	pod := netip.MustParseAddr("10.1.1.59")
	ips, err := c.PrivateIPs(ctx, instance, []netip.Addr{pod})
	if err != nil {
		t.Fatal(err)
	}
	if len(ips) != 62 || ips[pod] != "ocid1.privateip.oc1.iad.pod10.1.1.59" || ips[netip.MustParseAddr("10.0.0.2")] != "ocid1.privateip.oc1.iad.primary" {
		t.Errorf("private IPs: %d, %v", len(ips), ips)
	}
	emu.ResetCalls()
	if _, err := c.PrivateIPs(ctx, instance, []netip.Addr{pod, netip.MustParseAddr("10.1.9.9")}); err != nil {
		t.Fatal(err)
	}
	if calls := emu.Calls(); len(calls) != 0 {
		t.Errorf("a fresh listing was read again: %+v", calls)
	}

	_, err = c.PrivateIPs(ctx, "ocid1.instance.oc1.iad.unreadable", nil)
	if e, ok := errors.AsType[*oci.Error](err); !ok || e.Status != 404 || e.Op != "GetInstance" {
		t.Errorf("an unreadable instance: %v", err)
	}
	var ops []string
	for _, c := range emu.Calls() {
		ops = append(ops, c.Operation)
	}
	if d := cmp.Diff([]string{"GetInstance"}, ops); d != "" {
		t.Errorf("calls (-want +got):\n%s", d)
	}
}
