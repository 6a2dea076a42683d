package ociemu_test

import (
	"net/http"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/oracle/oci-go-sdk/v65/common"
	"github.com/oracle/oci-go-sdk/v65/loadbalancer"
	"github.com/oracle/oci-go-sdk/v65/networkloadbalancer"

	"github.com/peppy-ratio/lbregistrar/test/ociemu"
)

func TestClassicReads(t *testing.T) {
	transports(t, ociemu.Options{}, func(t *testing.T, f *fixture) {
		lb, err := f.lb.GetLoadBalancer(f.context, loadbalancer.GetLoadBalancerRequest{LoadBalancerId: common.String(classicID)})
		must(t, err)
		if *lb.Id != classicID || *lb.DisplayName != "ingress" || lb.LifecycleState != loadbalancer.LoadBalancerLifecycleStateActive {
			t.Errorf("GetLoadBalancer = %s %s %s", *lb.Id, *lb.DisplayName, lb.LifecycleState)
		}
		if lb.ETag == nil || *lb.ETag == "" || lb.OpcRequestId == nil || *lb.OpcRequestId == "" {
			t.Errorf("GetLoadBalancer lacks etag or opc-request-id")
		}
		if lb.RawResponse.StatusCode != http.StatusOK {
			t.Errorf("status %d", lb.RawResponse.StatusCode)
		}

		sets, err := f.lb.ListBackendSets(f.context, loadbalancer.ListBackendSetsRequest{LoadBalancerId: common.String(classicID)})
		must(t, err)
		if len(sets.Items) != 1 || *sets.Items[0].Name != "web" {
			t.Fatalf("ListBackendSets = %v", sets.Items)
		}

		set, err := f.lb.GetBackendSet(f.context, loadbalancer.GetBackendSetRequest{
			LoadBalancerId: common.String(classicID), BackendSetName: common.String("web")})
		must(t, err)
		want := loadbalancer.BackendSet{
			Name: common.String("web"), Policy: common.String("LEAST_CONNECTIONS"),
			Backends: []loadbalancer.Backend{{Name: common.String("10.0.0.99:8080"), IpAddress: common.String("10.0.0.99"),
				Port: common.Int(8080), Weight: common.Int(3), Drain: common.Bool(false), Backup: common.Bool(true), Offline: common.Bool(false)}},
			HealthChecker: &loadbalancer.HealthChecker{Protocol: common.String("HTTP"), Port: common.Int(8080),
				UrlPath: common.String("/healthz"), ReturnCode: common.Int(200), ResponseBodyRegex: common.String("")},
			SslConfiguration: &loadbalancer.SslConfiguration{VerifyDepth: common.Int(3), VerifyPeerCertificate: common.Bool(true),
				CertificateName: common.String("backend-ca")},
			SessionPersistenceConfiguration: &loadbalancer.SessionPersistenceConfigurationDetails{
				CookieName: common.String("SESSION"), DisableFallback: common.Bool(true)},
		}
		if diff := cmp.Diff(want, set.BackendSet); diff != "" {
			t.Errorf("GetBackendSet (-want +got):\n%s", diff)
		}
		if set.ETag == nil || *set.ETag == "" {
			t.Errorf("GetBackendSet lacks etag")
		}

		backends, err := f.lb.ListBackends(f.context, loadbalancer.ListBackendsRequest{
			LoadBalancerId: common.String(classicID), BackendSetName: common.String("web")})
		must(t, err)
		if diff := cmp.Diff(want.Backends, backends.Items); diff != "" {
			t.Errorf("ListBackends (-want +got):\n%s", diff)
		}
		backend, err := f.lb.GetBackend(f.context, loadbalancer.GetBackendRequest{
			LoadBalancerId: common.String(classicID), BackendSetName: common.String("web"), BackendName: common.String("10.0.0.99:8080")})
		must(t, err)
		if diff := cmp.Diff(want.Backends[0], backend.Backend); diff != "" {
			t.Errorf("GetBackend (-want +got):\n%s", diff)
		}
	})
}

func TestNetworkReads(t *testing.T) {
	transports(t, ociemu.Options{}, func(t *testing.T, f *fixture) {
		nlb, err := f.nlb.GetNetworkLoadBalancer(f.context, networkloadbalancer.GetNetworkLoadBalancerRequest{
			NetworkLoadBalancerId: common.String(networkID)})
		must(t, err)
		if *nlb.Id != networkID || nlb.LifecycleState != networkloadbalancer.LifecycleStateActive || *nlb.CompartmentId != compartment {
			t.Errorf("GetNetworkLoadBalancer = %s %s %s", *nlb.Id, nlb.LifecycleState, *nlb.CompartmentId)
		}
		if nlb.Etag == nil || *nlb.Etag == "" {
			t.Errorf("GetNetworkLoadBalancer lacks etag")
		}
		if _, ok := nlb.BackendSets["tcp"]; !ok {
			t.Errorf("backend set tcp missing from %v", nlb.BackendSets)
		}

		wantBackends := []networkloadbalancer.Backend{
			{Name: common.String("10.0.0.99:30080"), IpAddress: common.String("10.0.0.99"), Port: common.Int(30080),
				Weight: common.Int(2), IsDrain: common.Bool(false), IsBackup: common.Bool(false), IsOffline: common.Bool(false)},
			{Name: common.String("ocid1.instance.oc1.iad.someoneelse:30080"), TargetId: common.String("ocid1.instance.oc1.iad.someoneelse"),
				Port: common.Int(30080), Weight: common.Int(1), IsDrain: common.Bool(false), IsBackup: common.Bool(false), IsOffline: common.Bool(false)},
		}
		set, err := f.nlb.GetBackendSet(f.context, networkloadbalancer.GetBackendSetRequest{
			NetworkLoadBalancerId: common.String(networkID), BackendSetName: common.String("tcp")})
		must(t, err)
		want := networkloadbalancer.BackendSet{
			Name: common.String("tcp"), Policy: networkloadbalancer.NetworkLoadBalancingPolicyThreeTuple,
			IsPreserveSource: common.Bool(false), IsFailOpen: common.Bool(true),
			HealthChecker: &networkloadbalancer.HealthChecker{Protocol: networkloadbalancer.HealthCheckProtocolsTcp, Port: common.Int(30080)},
			Backends:      wantBackends,
		}
		if diff := cmp.Diff(want, set.BackendSet); diff != "" {
			t.Errorf("GetBackendSet (-want +got):\n%s", diff)
		}
		if set.Etag == nil || *set.Etag == "" {
			t.Fatalf("GetBackendSet lacks etag")
		}
		notModified, err := f.nlb.GetBackendSet(f.context, networkloadbalancer.GetBackendSetRequest{
			NetworkLoadBalancerId: common.String(networkID), BackendSetName: common.String("tcp"), IfNoneMatch: set.Etag})
		if notModified.RawResponse == nil || notModified.RawResponse.StatusCode != http.StatusNotModified {
			t.Errorf("GetBackendSet with If-None-Match of the current etag: %v, %v", notModified.RawResponse, err)
		}

		sets, err := f.nlb.ListBackendSets(f.context, networkloadbalancer.ListBackendSetsRequest{
			NetworkLoadBalancerId: common.String(networkID)})
		must(t, err)
		if len(sets.Items) != 1 || *sets.Items[0].Name != "tcp" || len(sets.Items[0].Backends) != 2 {
			t.Fatalf("ListBackendSets = %v", sets.Items)
		}

		backends, err := f.nlb.ListBackends(f.context, networkloadbalancer.ListBackendsRequest{
			NetworkLoadBalancerId: common.String(networkID), BackendSetName: common.String("tcp")})
		must(t, err)
		var got []networkloadbalancer.Backend
		for _, b := range backends.Items {
			got = append(got, networkloadbalancer.Backend(b))
		}
		if diff := cmp.Diff(wantBackends, got); diff != "" {
			t.Errorf("ListBackends (-want +got):\n%s", diff)
		}
		page, err := f.nlb.ListBackends(f.context, networkloadbalancer.ListBackendsRequest{
			NetworkLoadBalancerId: common.String(networkID), BackendSetName: common.String("tcp"), Limit: common.Int(1)})
		must(t, err)
		if len(page.Items) != 1 || page.OpcNextPage == nil {
			t.Fatalf("first page of one: %d items, next %v", len(page.Items), page.OpcNextPage)
		}
		page, err = f.nlb.ListBackends(f.context, networkloadbalancer.ListBackendsRequest{
			NetworkLoadBalancerId: common.String(networkID), BackendSetName: common.String("tcp"), Limit: common.Int(1), Page: page.OpcNextPage})
		must(t, err)
		if len(page.Items) != 1 || *page.Items[0].Name != *wantBackends[1].Name || page.OpcNextPage != nil {
			t.Fatalf("second page: %v, next %v", page.Items, page.OpcNextPage)
		}

		backend, err := f.nlb.GetBackend(f.context, networkloadbalancer.GetBackendRequest{
			NetworkLoadBalancerId: common.String(networkID), BackendSetName: common.String("tcp"), BackendName: common.String("10.0.0.99:30080")})
		must(t, err)
		if diff := cmp.Diff(wantBackends[0], backend.Backend); diff != "" {
			t.Errorf("GetBackend (-want +got):\n%s", diff)
		}
	})
}

// Unknown OCIDs and names are 404 NotAuthorizedOrNotFound, as OCI answers
// both "does not exist" and "you may not see it".
func TestNotFound(t *testing.T) {
	transports(t, ociemu.Options{}, func(t *testing.T, f *fixture) {
		ctx := f.context
		_, err := f.lb.GetLoadBalancer(ctx, loadbalancer.GetLoadBalancerRequest{LoadBalancerId: common.String("ocid1.loadbalancer.oc1.iad.nosuch")})
		serviceError(t, err, 404, "NotAuthorizedOrNotFound")
		_, err = f.lb.GetLoadBalancer(ctx, loadbalancer.GetLoadBalancerRequest{LoadBalancerId: common.String(networkID)})
		serviceError(t, err, 404, "NotAuthorizedOrNotFound")
		_, err = f.lb.GetBackendSet(ctx, loadbalancer.GetBackendSetRequest{LoadBalancerId: common.String(classicID), BackendSetName: common.String("nosuch")})
		serviceError(t, err, 404, "NotAuthorizedOrNotFound")
		_, err = f.lb.GetBackend(ctx, loadbalancer.GetBackendRequest{LoadBalancerId: common.String(classicID),
			BackendSetName: common.String("web"), BackendName: common.String("10.9.9.9:1")})
		serviceError(t, err, 404, "NotAuthorizedOrNotFound")
		_, err = f.lb.UpdateBackendSet(ctx, loadbalancer.UpdateBackendSetRequest{LoadBalancerId: common.String(classicID),
			BackendSetName: common.String("nosuch"), UpdateBackendSetDetails: loadbalancer.UpdateBackendSetDetails{Backends: []loadbalancer.BackendDetails{}}})
		serviceError(t, err, 404, "NotAuthorizedOrNotFound")
		_, err = f.lb.DeleteBackend(ctx, loadbalancer.DeleteBackendRequest{LoadBalancerId: common.String(classicID),
			BackendSetName: common.String("web"), BackendName: common.String("10.9.9.9:1")})
		serviceError(t, err, 404, "NotAuthorizedOrNotFound")
		_, err = f.lb.GetWorkRequest(ctx, loadbalancer.GetWorkRequestRequest{WorkRequestId: common.String("ocid1.loadbalancerworkrequest.oc1.iad.nosuch")})
		serviceError(t, err, 404, "NotAuthorizedOrNotFound")
		_, err = f.lb.ListWorkRequests(ctx, loadbalancer.ListWorkRequestsRequest{LoadBalancerId: common.String("ocid1.loadbalancer.oc1.iad.nosuch")})
		serviceError(t, err, 404, "NotAuthorizedOrNotFound")

		_, err = f.nlb.GetNetworkLoadBalancer(ctx, networkloadbalancer.GetNetworkLoadBalancerRequest{NetworkLoadBalancerId: common.String(classicID)})
		serviceError(t, err, 404, "NotAuthorizedOrNotFound")
		_, err = f.nlb.GetBackendSet(ctx, networkloadbalancer.GetBackendSetRequest{NetworkLoadBalancerId: common.String(networkID), BackendSetName: common.String("nosuch")})
		serviceError(t, err, 404, "NotAuthorizedOrNotFound")
		_, err = f.nlb.GetBackend(ctx, networkloadbalancer.GetBackendRequest{NetworkLoadBalancerId: common.String(networkID),
			BackendSetName: common.String("tcp"), BackendName: common.String("10.9.9.9:1")})
		serviceError(t, err, 404, "NotAuthorizedOrNotFound")
		_, err = f.nlb.UpdateBackend(ctx, networkloadbalancer.UpdateBackendRequest{NetworkLoadBalancerId: common.String(networkID),
			BackendSetName: common.String("tcp"), BackendName: common.String("10.9.9.9:1")})
		serviceError(t, err, 404, "NotAuthorizedOrNotFound")
		_, err = f.nlb.GetWorkRequest(ctx, networkloadbalancer.GetWorkRequestRequest{WorkRequestId: common.String("ocid1.nlbworkrequest.oc1.iad.nosuch")})
		serviceError(t, err, 404, "NotAuthorizedOrNotFound")
	})
}

// A principal no IAM policy names is answered 404 NotAuthorizedOrNotFound
// for the load balancers that exist, as for ones that do not, until a
// policy names it again.
func TestPrincipalWithoutPolicySeesNothing(t *testing.T) {
	transports(t, ociemu.Options{}, func(t *testing.T, f *fixture) {
		ctx := f.context
		user, err := f.config.UserOCID()
		if err != nil {
			t.Fatal(err)
		}
		f.emu.RevokePolicies(user)
		_, err = f.lb.GetLoadBalancer(ctx, loadbalancer.GetLoadBalancerRequest{LoadBalancerId: common.String(classicID)})
		serviceError(t, err, 404, "NotAuthorizedOrNotFound")
		_, err = f.nlb.GetBackendSet(ctx, networkloadbalancer.GetBackendSetRequest{NetworkLoadBalancerId: common.String(networkID), BackendSetName: common.String("tcp")})
		serviceError(t, err, 404, "NotAuthorizedOrNotFound")
		f.emu.GrantPolicies(user)
		if _, err := f.lb.GetLoadBalancer(ctx, loadbalancer.GetLoadBalancerRequest{LoadBalancerId: common.String(classicID)}); err != nil {
			t.Fatalf("with the policy back: %v", err)
		}
	})
}
