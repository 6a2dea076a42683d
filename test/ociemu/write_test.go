package ociemu_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/oracle/oci-go-sdk/v65/common"
	"github.com/oracle/oci-go-sdk/v65/loadbalancer"
	"github.com/oracle/oci-go-sdk/v65/networkloadbalancer"

	"github.com/peppy-ratio/lbregistrar/test/ociemu"
)

// slow keeps work requests in flight until the test calls FinishWorkRequests.
var slow = ociemu.Options{WorkRequestLatency: time.Hour}

func TestClassicUpdateBackendSetIsAsynchronous(t *testing.T) {
	transports(t, slow, func(t *testing.T, f *fixture) {
		before, err := f.lb.GetBackendSet(f.context, loadbalancer.GetBackendSetRequest{
			LoadBalancerId: common.String(classicID), BackendSetName: common.String("web")})
		must(t, err)
		details := classicDetails(before.BackendSet,
			loadbalancer.BackendDetails{IpAddress: common.String("10.0.1.1"), Port: common.Int(31000), Weight: common.Int(2)},
			loadbalancer.BackendDetails{IpAddress: common.String("10.0.1.2"), Port: common.Int(31000)})
		details.SslConfiguration = &loadbalancer.SslConfigurationDetails{VerifyDepth: common.Int(3), VerifyPeerCertificate: common.Bool(true),
			CertificateName: common.String("backend-ca")}
		details.SessionPersistenceConfiguration = before.SessionPersistenceConfiguration

		update, err := f.lb.UpdateBackendSet(f.context, loadbalancer.UpdateBackendSetRequest{
			LoadBalancerId: common.String(classicID), BackendSetName: common.String("web"),
			UpdateBackendSetDetails: details, IfMatch: before.ETag})
		must(t, err)
		if update.OpcWorkRequestId == nil || update.OpcRequestId == nil {
			t.Fatalf("UpdateBackendSet lacks opc-work-request-id or opc-request-id")
		}
		if update.RawResponse.StatusCode != http.StatusNoContent {
			t.Errorf("UpdateBackendSet status %d, want 204", update.RawResponse.StatusCode)
		}

		wr, err := f.lb.GetWorkRequest(f.context, loadbalancer.GetWorkRequestRequest{WorkRequestId: update.OpcWorkRequestId})
		must(t, err)
		if wr.LifecycleState != loadbalancer.WorkRequestLifecycleStateAccepted || *wr.LoadBalancerId != classicID || *wr.Type != "UpdateBackendSet" {
			t.Errorf("fresh work request: %s %s %s", wr.LifecycleState, *wr.LoadBalancerId, *wr.Type)
		}
		during, err := f.lb.GetBackendSet(f.context, loadbalancer.GetBackendSetRequest{
			LoadBalancerId: common.String(classicID), BackendSetName: common.String("web")})
		must(t, err)
		if diff := cmp.Diff(before.BackendSet, during.BackendSet); diff != "" {
			t.Errorf("backend set changed before its work request finished:\n%s", diff)
		}
		list, err := f.lb.ListWorkRequests(f.context, loadbalancer.ListWorkRequestsRequest{LoadBalancerId: common.String(classicID)})
		must(t, err)
		if len(list.Items) != 1 || *list.Items[0].Id != *update.OpcWorkRequestId {
			t.Errorf("ListWorkRequests = %v", list.Items)
		}

		f.emu.FinishWorkRequests()
		done := f.waitClassic(t, *update.OpcWorkRequestId)
		if done.LifecycleState != loadbalancer.WorkRequestLifecycleStateSucceeded || done.TimeFinished == nil {
			t.Fatalf("work request ended %s", done.LifecycleState)
		}
		after, err := f.lb.GetBackendSet(f.context, loadbalancer.GetBackendSetRequest{
			LoadBalancerId: common.String(classicID), BackendSetName: common.String("web")})
		must(t, err)
		want := []loadbalancer.Backend{
			{Name: common.String("10.0.1.1:31000"), IpAddress: common.String("10.0.1.1"), Port: common.Int(31000), Weight: common.Int(2),
				Drain: common.Bool(false), Backup: common.Bool(false), Offline: common.Bool(false)},
			{Name: common.String("10.0.1.2:31000"), IpAddress: common.String("10.0.1.2"), Port: common.Int(31000), Weight: common.Int(1),
				Drain: common.Bool(false), Backup: common.Bool(false), Offline: common.Bool(false)},
		}
		if diff := cmp.Diff(want, after.Backends); diff != "" {
			t.Errorf("backends after the update (-want +got):\n%s", diff)
		}
		if after.SslConfiguration == nil || after.SessionPersistenceConfiguration == nil || *after.HealthChecker.UrlPath != "/healthz" {
			t.Errorf("settings carried over by the client were lost: %v", after.BackendSet)
		}
		if *after.ETag == *before.ETag {
			t.Errorf("etag did not change with the backend set")
		}
		got, err := f.emu.Backends(classicID, "web")
		must(t, err)
		if len(got) != 2 || got[0].Name != "10.0.1.1:31000" {
			t.Errorf("Emulator.Backends = %v", got)
		}
	})
}

func TestNetworkUpdateBackendSetIsAsynchronous(t *testing.T) {
	transports(t, slow, func(t *testing.T, f *fixture) {
		before, err := f.nlb.GetBackendSet(f.context, networkloadbalancer.GetBackendSetRequest{
			NetworkLoadBalancerId: common.String(networkID), BackendSetName: common.String("tcp")})
		must(t, err)
		update, err := f.nlb.UpdateBackendSet(f.context, networkloadbalancer.UpdateBackendSetRequest{
			NetworkLoadBalancerId: common.String(networkID), BackendSetName: common.String("tcp"), IfMatch: before.Etag,
			UpdateBackendSetDetails: networkloadbalancer.UpdateBackendSetDetails{
				Policy: common.String(string(before.Policy)), IsPreserveSource: before.IsPreserveSource, IsFailOpen: before.IsFailOpen,
				HealthChecker: &networkloadbalancer.HealthCheckerDetails{Protocol: before.HealthChecker.Protocol, Port: before.HealthChecker.Port},
				Backends: []networkloadbalancer.BackendDetails{
					{IpAddress: common.String("10.0.1.1"), Port: common.Int(31000), Weight: common.Int(5)},
					{TargetId: common.String("ocid1.instance.oc1.iad.mine"), Port: common.Int(31000), IsDrain: common.Bool(true)},
				},
			}})
		must(t, err)
		if update.RawResponse.StatusCode != http.StatusAccepted || update.OpcWorkRequestId == nil {
			t.Fatalf("UpdateBackendSet: status %d, work request %v", update.RawResponse.StatusCode, update.OpcWorkRequestId)
		}

		nlb, err := f.nlb.GetNetworkLoadBalancer(f.context, networkloadbalancer.GetNetworkLoadBalancerRequest{NetworkLoadBalancerId: common.String(networkID)})
		must(t, err)
		if nlb.LifecycleState != networkloadbalancer.LifecycleStateUpdating {
			t.Errorf("lifecycle during the work request: %s", nlb.LifecycleState)
		}
		wr, err := f.nlb.GetWorkRequest(f.context, networkloadbalancer.GetWorkRequestRequest{WorkRequestId: update.OpcWorkRequestId})
		must(t, err)
		if wr.Status != networkloadbalancer.OperationStatusAccepted || wr.OperationType != networkloadbalancer.OperationTypeUpdateBackendset ||
			len(wr.Resources) != 1 || *wr.Resources[0].Identifier != networkID {
			t.Errorf("fresh work request: %s %s %v", wr.Status, wr.OperationType, wr.Resources)
		}
		list, err := f.nlb.ListWorkRequests(f.context, networkloadbalancer.ListWorkRequestsRequest{CompartmentId: common.String(compartment)})
		must(t, err)
		if len(list.Items) != 1 || *list.Items[0].Id != *update.OpcWorkRequestId || list.Items[0].Status != networkloadbalancer.OperationStatusAccepted {
			t.Errorf("ListWorkRequests = %v", list.Items)
		}

		f.emu.FinishWorkRequests()
		done := f.waitNetwork(t, *update.OpcWorkRequestId)
		if done.Status != networkloadbalancer.OperationStatusSucceeded || *done.PercentComplete != 100 || done.TimeStarted == nil {
			t.Fatalf("work request ended %s %v", done.Status, *done.PercentComplete)
		}
		nlb, err = f.nlb.GetNetworkLoadBalancer(f.context, networkloadbalancer.GetNetworkLoadBalancerRequest{NetworkLoadBalancerId: common.String(networkID)})
		must(t, err)
		if nlb.LifecycleState != networkloadbalancer.LifecycleStateActive {
			t.Errorf("lifecycle after the work request: %s", nlb.LifecycleState)
		}
		after, err := f.nlb.GetBackendSet(f.context, networkloadbalancer.GetBackendSetRequest{
			NetworkLoadBalancerId: common.String(networkID), BackendSetName: common.String("tcp")})
		must(t, err)
		want := []networkloadbalancer.Backend{
			{Name: common.String("10.0.1.1:31000"), IpAddress: common.String("10.0.1.1"), Port: common.Int(31000), Weight: common.Int(5),
				IsDrain: common.Bool(false), IsBackup: common.Bool(false), IsOffline: common.Bool(false)},
			{Name: common.String("ocid1.instance.oc1.iad.mine:31000"), TargetId: common.String("ocid1.instance.oc1.iad.mine"), Port: common.Int(31000),
				Weight: common.Int(1), IsDrain: common.Bool(true), IsBackup: common.Bool(false), IsOffline: common.Bool(false)},
		}
		if diff := cmp.Diff(want, after.Backends); diff != "" {
			t.Errorf("backends after the update (-want +got):\n%s", diff)
		}
		if after.Policy != networkloadbalancer.NetworkLoadBalancingPolicyThreeTuple || !*after.IsFailOpen || *after.IsPreserveSource {
			t.Errorf("settings carried over by the client were lost: %s fail-open %v preserve-source %v", after.Policy, *after.IsFailOpen, *after.IsPreserveSource)
		}
		if after.HealthChecker == nil || after.HealthChecker.Protocol != networkloadbalancer.HealthCheckProtocolsTcp || *after.HealthChecker.Port != 30080 {
			t.Errorf("health checker carried over by the client was lost: %v", after.HealthChecker)
		}
	})
}

// A second write while a work request is in flight is refused with 409,
// for an NLB with OCI's exact code and message.
func TestConflictWhileUpdating(t *testing.T) {
	transports(t, slow, func(t *testing.T, f *fixture) {
		nlbUpdate := networkloadbalancer.UpdateBackendSetRequest{
			NetworkLoadBalancerId: common.String(networkID), BackendSetName: common.String("tcp"),
			UpdateBackendSetDetails: networkloadbalancer.UpdateBackendSetDetails{IsPreserveSource: common.Bool(false), Backends: []networkloadbalancer.BackendDetails{}}}
		first, err := f.nlb.UpdateBackendSet(f.context, nlbUpdate)
		must(t, err)
		_, err = f.nlb.UpdateBackendSet(f.context, nlbUpdate)
		se := serviceError(t, err, 409, "Conflict")
		if se.GetMessage() != "Invalid State Transition of NLB lifeCycle state from Updating to Updating" {
			t.Errorf("message %q", se.GetMessage())
		}
		_, err = f.nlb.DeleteBackend(f.context, networkloadbalancer.DeleteBackendRequest{NetworkLoadBalancerId: common.String(networkID),
			BackendSetName: common.String("tcp"), BackendName: common.String("10.0.0.99:30080")})
		serviceError(t, err, 409, "Conflict")

		set, err := f.lb.GetBackendSet(f.context, loadbalancer.GetBackendSetRequest{LoadBalancerId: common.String(classicID), BackendSetName: common.String("web")})
		must(t, err)
		lbUpdate := loadbalancer.UpdateBackendSetRequest{LoadBalancerId: common.String(classicID), BackendSetName: common.String("web"),
			UpdateBackendSetDetails: classicDetails(set.BackendSet)}
		_, err = f.lb.UpdateBackendSet(f.context, lbUpdate)
		must(t, err)
		_, err = f.lb.UpdateBackendSet(f.context, lbUpdate)
		serviceError(t, err, 409, "Conflict")

		c := f.emu.Counters()
		if c.Conflicts != 3 || c.WorkRequests != 2 || c.Writes[networkID] != 1 || c.Writes[classicID] != 1 {
			t.Errorf("counters %+v", c)
		}
		f.emu.FinishWorkRequests()
		f.waitNetwork(t, *first.OpcWorkRequestId)
		_, err = f.nlb.UpdateBackendSet(f.context, nlbUpdate)
		must(t, err)
	})
}

func TestClassicConflictCodeIsConfigurable(t *testing.T) {
	opts := slow
	opts.ClassicConflictCode = "IncorrectState"
	f := newFixture(t, opts, false)
	set, err := f.lb.GetBackendSet(f.context, loadbalancer.GetBackendSetRequest{LoadBalancerId: common.String(classicID), BackendSetName: common.String("web")})
	must(t, err)
	req := loadbalancer.UpdateBackendSetRequest{LoadBalancerId: common.String(classicID), BackendSetName: common.String("web"),
		UpdateBackendSetDetails: classicDetails(set.BackendSet)}
	_, err = f.lb.UpdateBackendSet(f.context, req)
	must(t, err)
	_, err = f.lb.UpdateBackendSet(f.context, req)
	serviceError(t, err, 409, "IncorrectState")
}
