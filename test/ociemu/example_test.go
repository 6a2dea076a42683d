package ociemu_test

import (
	"context"
	"fmt"
	"log"

	"github.com/oracle/oci-go-sdk/v65/common"
	"github.com/oracle/oci-go-sdk/v65/networkloadbalancer"

	"github.com/peppy-ratio/lbregistrar/test/ociemu"
)

// A network load balancer seeded from Go values, a real SDK client over
// HTTPS, one backend registered and waited for.
func Example() {
	emu, err := ociemu.Start(ociemu.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer emu.Close()
	nlbID := "ocid1.networkloadbalancer.oc1.iad.example"
	err = emu.SeedState(ociemu.Seed{NetworkLoadBalancers: []networkloadbalancer.NetworkLoadBalancer{{
		Id: common.String(nlbID),
		BackendSets: map[string]networkloadbalancer.BackendSet{"ingress": {
			HealthChecker: &networkloadbalancer.HealthChecker{Protocol: networkloadbalancer.HealthCheckProtocolsTcp},
		}},
	}}})
	if err != nil {
		log.Fatal(err)
	}

	config, err := emu.NewUser()
	if err != nil {
		log.Fatal(err)
	}
	client, err := networkloadbalancer.NewNetworkLoadBalancerClientWithConfigurationProvider(config)
	if err != nil {
		log.Fatal(err)
	}
	client.Host = emu.HTTPSURL()
	client.HTTPClient = emu.HTTPClient()

	ctx := context.Background()
	set, err := client.GetBackendSet(ctx, networkloadbalancer.GetBackendSetRequest{
		NetworkLoadBalancerId: common.String(nlbID), BackendSetName: common.String("ingress")})
	if err != nil {
		log.Fatal(err)
	}
	update, err := client.UpdateBackendSet(ctx, networkloadbalancer.UpdateBackendSetRequest{
		NetworkLoadBalancerId: common.String(nlbID), BackendSetName: common.String("ingress"), IfMatch: set.Etag,
		UpdateBackendSetDetails: networkloadbalancer.UpdateBackendSetDetails{
			Policy:        common.String(string(set.Policy)),
			HealthChecker: &networkloadbalancer.HealthCheckerDetails{Protocol: set.HealthChecker.Protocol},
			// The backend set preserves the client's source (OCI's default),
			// so the node's instance selects the backend.
			Backends: []networkloadbalancer.BackendDetails{{IpAddress: common.String("10.0.0.7"), TargetId: common.String("ocid1.instance.oc1.iad.node1"), Port: common.Int(30443)}},
		}})
	if err != nil {
		log.Fatal(err)
	}
	wr, err := client.GetWorkRequest(ctx, networkloadbalancer.GetWorkRequestRequest{WorkRequestId: update.OpcWorkRequestId})
	if err != nil {
		log.Fatal(err)
	}
	backends, err := emu.Backends(nlbID, "ingress")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(wr.Status, backends[0].Name, emu.Counters().Writes[nlbID])
	// Output: SUCCEEDED 10.0.0.7:30443 1
}
