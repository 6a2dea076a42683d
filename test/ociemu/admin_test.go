package ociemu_test

import (
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/oracle/oci-go-sdk/v65/common"
	"github.com/oracle/oci-go-sdk/v65/loadbalancer"
	"github.com/oracle/oci-go-sdk/v65/networkloadbalancer"

	"github.com/peppy-ratio/lbregistrar/test/ociemu"
)

func admin(t *testing.T, method, url, body string, wantStatus int, into any) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	must(t, err)
	resp, err := http.DefaultClient.Do(req)
	must(t, err)
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != wantStatus {
		t.Fatalf("%s %s: %d %s", method, url, resp.StatusCode, data)
	}
	if into != nil {
		must(t, json.Unmarshal(data, into))
	}
}

func TestAdminEndpoint(t *testing.T) {
	f := newFixture(t, ociemu.Options{}, false)
	base := f.emu.URL() + "/admin"

	var state ociemu.Seed
	admin(t, "GET", base+"/state", "", 200, &state)
	if len(state.LoadBalancers) != 1 || len(state.NetworkLoadBalancers) != 1 || *state.LoadBalancers[0].Id != classicID {
		t.Fatalf("state %+v", state)
	}
	admin(t, "POST", base+"/state", `
networkLoadBalancers:
  - id: ocid1.networkloadbalancer.oc1.iad.added
    backendSets:
      udp:
        healthChecker: {protocol: UDP, port: 53}
`, 200, &state)
	if len(state.NetworkLoadBalancers) != 2 {
		t.Fatalf("seeding over the admin endpoint: %+v", state.NetworkLoadBalancers)
	}
	admin(t, "POST", base+"/state", `{"networkLoadBalancers":[{"id":"ocid1.loadbalancer.oc1.iad.wrongkind"}]}`, 400, nil)
	admin(t, "POST", base+"/state", `{"bogus":1}`, 400, nil)

	var created struct{ ID int }
	admin(t, "POST", base+"/faults", `{"operation":"GetNetworkLoadBalancer","status":429,"retryAfter":"3s","delay":"10ms"}`, 201, &created)
	var faults []map[string]any
	admin(t, "GET", base+"/faults", "", 200, &faults)
	if len(faults) != 1 || faults[0]["retryAfter"] != "3s" || faults[0]["delay"] != "10ms" || faults[0]["status"] != 429.0 {
		t.Fatalf("faults %v", faults)
	}
	resp, err := f.nlb.GetNetworkLoadBalancer(f.context, networkloadbalancer.GetNetworkLoadBalancerRequest{NetworkLoadBalancerId: common.String(networkID)})
	serviceError(t, err, 429, "TooManyRequests")
	if resp.RawResponse.Header.Get("retry-after") != "3" {
		t.Errorf("retry-after %q", resp.RawResponse.Header.Get("retry-after"))
	}
	admin(t, "DELETE", base+"/faults/"+strconv.Itoa(created.ID), "", 204, nil)
	_, err = f.nlb.GetNetworkLoadBalancer(f.context, networkloadbalancer.GetNetworkLoadBalancerRequest{NetworkLoadBalancerId: common.String(networkID)})
	must(t, err)
	admin(t, "POST", base+"/faults", `{"delay":"soon"}`, 400, nil)
	admin(t, "POST", base+"/faults", `{"stuckUpdating":true}`, 201, nil)
	admin(t, "DELETE", base+"/faults", "", 204, nil)
	if len(f.emu.Faults()) != 0 {
		t.Errorf("faults left: %v", f.emu.Faults())
	}

	update, err := f.nlb.UpdateBackendSet(f.context, f.emptyNetworkUpdate())
	must(t, err)
	var wrs []ociemu.WorkRequest
	admin(t, "GET", base+"/workrequests", "", 200, &wrs)
	if len(wrs) != 1 || wrs[0].ID != *update.OpcWorkRequestId || wrs[0].Status != ociemu.StateSucceeded {
		t.Errorf("work requests %+v", wrs)
	}
	var counters ociemu.Counters
	admin(t, "GET", base+"/counters", "", 200, &counters)
	if counters.Writes[networkID] != 1 || counters.WorkRequests != 1 || counters.Requests != 3 {
		t.Errorf("counters %+v", counters)
	}
	var calls []ociemu.Call
	admin(t, "GET", base+"/calls", "", 200, &calls)
	if len(calls) != 3 || calls[0].Code != "TooManyRequests" || calls[2].WorkRequestID != *update.OpcWorkRequestId {
		t.Errorf("calls %+v", calls)
	}
	admin(t, "DELETE", base+"/calls", "", 204, nil)
	if len(f.emu.Calls()) != 0 {
		t.Errorf("calls left after DELETE")
	}

	key, keyPEM := newKey(t)
	pubDER, err := x509.MarshalPKIXPublicKey(&key.PublicKey)
	must(t, err)
	body, _ := json.Marshal(map[string]string{"tenancy": "ocid1.tenancy.oc1..admin", "user": "ocid1.user.oc1..admin",
		"publicKeyPem": string(pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pubDER}))})
	var user ociemu.User
	admin(t, "POST", base+"/users", string(body), 201, &user)
	lb, _ := f.clients(t, common.NewRawConfigurationProvider(user.Tenancy, user.User, "us-ashburn-1", user.Fingerprint, keyPEM, nil))
	_, err = lb.GetLoadBalancer(f.context, loadbalancer.GetLoadBalancerRequest{LoadBalancerId: common.String(classicID)})
	must(t, err)
	admin(t, "POST", base+"/users", `{"tenancy":"t","user":"u","publicKeyPem":"junk"}`, 400, nil)
}

// Seeds with mistakes are refused with the field named; what State returns
// seeds an equal emulator.
func TestSeedValidationAndRoundTrip(t *testing.T) {
	emu, err := ociemu.Start(ociemu.Options{})
	must(t, err)
	defer emu.Close()
	for want, seed := range map[string]ociemu.Seed{
		"loadBalancers[0].id is required":    {LoadBalancers: []loadbalancer.LoadBalancer{{}}},
		"seed it under networkLoadBalancers": {LoadBalancers: []loadbalancer.LoadBalancer{{Id: common.String(networkID)}}},
		"networkLoadBalancers[0].id":         {NetworkLoadBalancers: []networkloadbalancer.NetworkLoadBalancer{{Id: common.String(classicID)}}},
		"loadBalancers[0].backendSets[web]: policy and healthChecker are required": {LoadBalancers: []loadbalancer.LoadBalancer{{
			Id: common.String(classicID), BackendSets: map[string]loadbalancer.BackendSet{"web": {}}}}},
		"networkLoadBalancers[0].backendSets[tcp].backends[0]": {NetworkLoadBalancers: []networkloadbalancer.NetworkLoadBalancer{{
			Id: common.String(networkID), BackendSets: map[string]networkloadbalancer.BackendSet{"tcp": {
				HealthChecker: &networkloadbalancer.HealthChecker{Protocol: "TCP"}, Backends: []networkloadbalancer.Backend{{Port: common.Int(1)}}}}}}},
	} {
		if err := emu.SeedState(seed); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("want an error containing %q, got %v", want, err)
		}
	}
	if len(emu.State().LoadBalancers)+len(emu.State().NetworkLoadBalancers) != 0 {
		t.Errorf("a refused seed left state behind")
	}
	if _, err := ociemu.LoadSeedFile("testdata/nosuch.yaml"); err == nil {
		t.Errorf("loading a missing file succeeded")
	}

	seed, err := ociemu.LoadSeedFile("testdata/seed.yaml")
	must(t, err)
	must(t, emu.SeedState(seed))
	dumped, err := json.Marshal(emu.State())
	must(t, err)
	file := filepath.Join(t.TempDir(), "state.json")
	must(t, os.WriteFile(file, dumped, 0o600))
	again, err := ociemu.LoadSeedFile(file)
	must(t, err)
	other, err := ociemu.Start(ociemu.Options{})
	must(t, err)
	defer other.Close()
	must(t, other.SeedState(again))
	redumped, err := json.Marshal(other.State())
	must(t, err)
	if string(dumped) != string(redumped) {
		t.Errorf("state does not survive a dump and reseed:\n%s\n%s", dumped, redumped)
	}
}

// The emulator shuts down cleanly with work requests still pending.
func TestCloseWithPendingWork(t *testing.T) {
	f := newFixture(t, ociemu.Options{WorkRequestLatency: time.Minute}, false)
	_, err := f.nlb.UpdateBackendSet(f.context, f.emptyNetworkUpdate())
	must(t, err)
	must(t, f.emu.Close())
	_, err = f.nlb.GetNetworkLoadBalancer(f.context, networkloadbalancer.GetNetworkLoadBalancerRequest{NetworkLoadBalancerId: common.String(networkID)})
	if err == nil {
		t.Errorf("a closed emulator answered")
	}
}
