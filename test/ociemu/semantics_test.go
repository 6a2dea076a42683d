package ociemu_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/oracle/oci-go-sdk/v65/common"
	"github.com/oracle/oci-go-sdk/v65/loadbalancer"
	"github.com/oracle/oci-go-sdk/v65/networkloadbalancer"

	"github.com/peppy-ratio/lbregistrar/test/ociemu"
)

// rawDo sends a request the SDK's typed clients refuse to build, signed by
// the SDK's own signer.
func (f *fixture) rawDo(t *testing.T, method, path string, body any) (int, map[string]string) {
	t.Helper()
	data, err := json.Marshal(body)
	must(t, err)
	req, err := http.NewRequest(method, f.emu.URL()+path, bytes.NewReader(data))
	must(t, err)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Date", time.Now().UTC().Format(http.TimeFormat))
	must(t, common.DefaultRequestSigner(f.config).Sign(req))
	resp, err := http.DefaultClient.Do(req)
	must(t, err)
	defer resp.Body.Close()
	var answer map[string]string
	raw, _ := io.ReadAll(resp.Body)
	must(t, json.Unmarshal(raw, &answer))
	return resp.StatusCode, answer
}

func (f *fixture) classicSet(t *testing.T) loadbalancer.GetBackendSetResponse {
	t.Helper()
	set, err := f.lb.GetBackendSet(f.context, loadbalancer.GetBackendSetRequest{LoadBalancerId: common.String(classicID), BackendSetName: common.String("web")})
	must(t, err)
	return set
}

func (f *fixture) networkSet(t *testing.T) networkloadbalancer.GetBackendSetResponse {
	t.Helper()
	set, err := f.nlb.GetBackendSet(f.context, networkloadbalancer.GetBackendSetRequest{NetworkLoadBalancerId: common.String(networkID), BackendSetName: common.String("tcp")})
	must(t, err)
	return set
}

// The Load Balancing API requires policy, backends and healthChecker in
// UpdateBackendSet; the SDK itself refuses to send a nil backends list.
func TestClassicUpdateBackendSetRequiresItsMandatoryFields(t *testing.T) {
	transports(t, ociemu.Options{}, func(t *testing.T, f *fixture) {
		full := classicDetails(f.classicSet(t).BackendSet)
		noPolicy, noHealth := full, full
		noPolicy.Policy = nil
		noHealth.HealthChecker = nil
		badPolicy := full
		badPolicy.Policy = common.String("RANDOM")
		for name, d := range map[string]loadbalancer.UpdateBackendSetDetails{"policy": noPolicy, "healthChecker": noHealth, "bad policy": badPolicy} {
			_, err := f.lb.UpdateBackendSet(f.context, loadbalancer.UpdateBackendSetRequest{LoadBalancerId: common.String(classicID),
				BackendSetName: common.String("web"), UpdateBackendSetDetails: d})
			if se := serviceError(t, err, 400, "InvalidParameter"); se.GetMessage() == "" {
				t.Errorf("%s: empty message", name)
			}
		}
		_, err := f.lb.UpdateBackendSet(f.context, loadbalancer.UpdateBackendSetRequest{LoadBalancerId: common.String(classicID),
			BackendSetName: common.String("web"), UpdateBackendSetDetails: loadbalancer.UpdateBackendSetDetails{Policy: full.Policy, HealthChecker: full.HealthChecker}})
		if err == nil {
			t.Fatalf("the SDK sent an UpdateBackendSet without backends")
		}
		if _, isService := common.IsServiceError(err); isService {
			t.Fatalf("want the SDK's own refusal, got a service error: %v", err)
		}
		status, answer := f.rawDo(t, http.MethodPut, "/20170115/loadBalancers/"+classicID+"/backendSets/web",
			map[string]any{"policy": "ROUND_ROBIN", "healthChecker": map[string]any{"protocol": "TCP"}})
		if status != 400 || answer["code"] != "InvalidParameter" {
			t.Errorf("raw UpdateBackendSet without backends: %d %v", status, answer)
		}
		if c := f.emu.Counters(); c.WorkRequests != 0 {
			t.Errorf("rejected updates created %d work requests", c.WorkRequests)
		}
	})
}

// UpdateBackendSet replaces the backend set: every setting a client leaves
// out is left unset, on both APIs, so a client that forgets to carry one is
// caught whatever value it had.
func TestSettingsLeftOutOfAnUpdateAreLost(t *testing.T) {
	transports(t, ociemu.Options{}, func(t *testing.T, f *fixture) {
		set := f.classicSet(t)
		if set.SslConfiguration == nil || set.SessionPersistenceConfiguration == nil || set.HealthChecker.UrlPath == nil {
			t.Fatalf("seed lacks SSL, session or health checker settings")
		}
		details := loadbalancer.UpdateBackendSetDetails{Policy: set.Policy, Backends: []loadbalancer.BackendDetails{},
			HealthChecker: &loadbalancer.HealthCheckerDetails{Protocol: common.String("TCP")}}
		update, err := f.lb.UpdateBackendSet(f.context, loadbalancer.UpdateBackendSetRequest{LoadBalancerId: common.String(classicID),
			BackendSetName: common.String("web"), UpdateBackendSetDetails: details})
		must(t, err)
		f.waitClassic(t, *update.OpcWorkRequestId)
		want := loadbalancer.BackendSet{Name: common.String("web"), Policy: set.Policy, Backends: []loadbalancer.Backend{},
			HealthChecker: &loadbalancer.HealthChecker{Protocol: common.String("TCP")}}
		if d := cmp.Diff(want, f.classicSet(t).BackendSet); d != "" {
			t.Errorf("classic settings left out survived (-want +got):\n%s", d)
		}

		nlbUpdate, err := f.nlb.UpdateBackendSet(f.context, networkloadbalancer.UpdateBackendSetRequest{NetworkLoadBalancerId: common.String(networkID),
			BackendSetName: common.String("tcp"), UpdateBackendSetDetails: networkloadbalancer.UpdateBackendSetDetails{
				Backends: []networkloadbalancer.BackendDetails{{TargetId: common.String("ocid1.instance.oc1.iad.left"), Port: common.Int(31000)}}}})
		must(t, err)
		f.waitNetwork(t, *nlbUpdate.OpcWorkRequestId)
		nlbWant := networkloadbalancer.BackendSet{Name: common.String("tcp"), Backends: []networkloadbalancer.Backend{{
			Name: common.String("ocid1.instance.oc1.iad.left:31000"), TargetId: common.String("ocid1.instance.oc1.iad.left"), Port: common.Int(31000),
			Weight: common.Int(1), IsDrain: common.Bool(false), IsBackup: common.Bool(false), IsOffline: common.Bool(false)}}}
		if d := cmp.Diff(nlbWant, f.networkSet(t).BackendSet); d != "" {
			t.Errorf("NLB settings left out survived (-want +got):\n%s", d)
		}
	})
}

// If-Match with a stale etag is 412 NoEtagMatch on every write of both APIs.
func TestIfMatch(t *testing.T) {
	transports(t, ociemu.Options{}, func(t *testing.T, f *fixture) {
		stale := common.String("not-the-current-etag")
		set := f.classicSet(t)
		_, err := f.lb.UpdateBackendSet(f.context, loadbalancer.UpdateBackendSetRequest{LoadBalancerId: common.String(classicID),
			BackendSetName: common.String("web"), UpdateBackendSetDetails: classicDetails(set.BackendSet), IfMatch: stale})
		serviceError(t, err, 412, "NoEtagMatch")
		_, err = f.lb.CreateBackend(f.context, loadbalancer.CreateBackendRequest{LoadBalancerId: common.String(classicID),
			BackendSetName: common.String("web"), IfMatch: stale,
			CreateBackendDetails: loadbalancer.CreateBackendDetails{IpAddress: common.String("10.0.2.1"), Port: common.Int(80)}})
		serviceError(t, err, 412, "NoEtagMatch")
		_, err = f.lb.DeleteBackend(f.context, loadbalancer.DeleteBackendRequest{LoadBalancerId: common.String(classicID),
			BackendSetName: common.String("web"), BackendName: common.String("10.0.0.99:8080"), IfMatch: stale})
		serviceError(t, err, 412, "NoEtagMatch")

		nlbSet := f.networkSet(t)
		_, err = f.nlb.UpdateBackendSet(f.context, networkloadbalancer.UpdateBackendSetRequest{NetworkLoadBalancerId: common.String(networkID),
			BackendSetName: common.String("tcp"), IfMatch: stale, UpdateBackendSetDetails: networkloadbalancer.UpdateBackendSetDetails{}})
		serviceError(t, err, 412, "NoEtagMatch")
		_, err = f.nlb.UpdateBackend(f.context, networkloadbalancer.UpdateBackendRequest{NetworkLoadBalancerId: common.String(networkID),
			BackendSetName: common.String("tcp"), BackendName: common.String("10.0.0.99:30080"), IfMatch: stale})
		serviceError(t, err, 412, "NoEtagMatch")

		// The etag read before someone else's change no longer matches.
		other, err := f.nlb.UpdateBackendSet(f.context, networkloadbalancer.UpdateBackendSetRequest{NetworkLoadBalancerId: common.String(networkID),
			BackendSetName: common.String("tcp"), IfMatch: nlbSet.Etag, UpdateBackendSetDetails: networkloadbalancer.UpdateBackendSetDetails{}})
		must(t, err)
		f.waitNetwork(t, *other.OpcWorkRequestId)
		_, err = f.nlb.UpdateBackendSet(f.context, networkloadbalancer.UpdateBackendSetRequest{NetworkLoadBalancerId: common.String(networkID),
			BackendSetName: common.String("tcp"), IfMatch: nlbSet.Etag, UpdateBackendSetDetails: networkloadbalancer.UpdateBackendSetDetails{}})
		serviceError(t, err, 412, "NoEtagMatch")

		_, err = f.lb.UpdateBackendSet(f.context, loadbalancer.UpdateBackendSetRequest{LoadBalancerId: common.String(classicID),
			BackendSetName: common.String("web"), UpdateBackendSetDetails: classicDetails(set.BackendSet), IfMatch: set.ETag})
		must(t, err)
	})
}

// A classic load balancer has one etag for itself and everything in it, so a
// change to one backend set, or to anything else of the load balancer, makes
// the etag read with another set stale. NLB etags are per backend set.
func TestEtagScope(t *testing.T) {
	transports(t, ociemu.Options{}, func(t *testing.T, f *fixture) {
		const classic, network = "ocid1.loadbalancer.oc1.iad.twosets", "ocid1.networkloadbalancer.oc1.iad.twosets"
		hc := &loadbalancer.HealthChecker{Protocol: common.String("TCP"), Port: common.Int(443)}
		nhc := &networkloadbalancer.HealthChecker{Protocol: networkloadbalancer.HealthCheckProtocolsTcp, Port: common.Int(443)}
		must(t, f.emu.SeedState(ociemu.Seed{
			LoadBalancers: []loadbalancer.LoadBalancer{{Id: common.String(classic), BackendSets: map[string]loadbalancer.BackendSet{
				"a": {Policy: common.String("ROUND_ROBIN"), HealthChecker: hc}, "b": {Policy: common.String("ROUND_ROBIN"), HealthChecker: hc}}}},
			NetworkLoadBalancers: []networkloadbalancer.NetworkLoadBalancer{{Id: common.String(network), BackendSets: map[string]networkloadbalancer.BackendSet{
				"a": {HealthChecker: nhc}, "b": {HealthChecker: nhc}}}},
		}))
		classicSet := func(name string) loadbalancer.GetBackendSetResponse {
			resp, err := f.lb.GetBackendSet(f.context, loadbalancer.GetBackendSetRequest{LoadBalancerId: common.String(classic), BackendSetName: &name})
			must(t, err)
			return resp
		}
		updateClassic := func(set loadbalancer.GetBackendSetResponse) (loadbalancer.UpdateBackendSetResponse, error) {
			return f.lb.UpdateBackendSet(f.context, loadbalancer.UpdateBackendSetRequest{LoadBalancerId: common.String(classic),
				BackendSetName: set.Name, IfMatch: set.ETag, UpdateBackendSetDetails: classicDetails(set.BackendSet)})
		}
		a, b := classicSet("a"), classicSet("b")
		if *a.ETag != *b.ETag {
			t.Fatalf("classic backend sets of one load balancer have different etags: %s, %s", *a.ETag, *b.ETag)
		}
		wrote, err := updateClassic(a)
		must(t, err)
		f.waitClassic(t, *wrote.OpcWorkRequestId)
		_, err = updateClassic(b)
		serviceError(t, err, 412, "NoEtagMatch")
		wrote, err = updateClassic(classicSet("b"))
		must(t, err)
		f.waitClassic(t, *wrote.OpcWorkRequestId)

		// Another client changing the load balancer (a listener) moves the etag on too.
		f.emu.AddFault(ociemu.Fault{Operation: "GetBackendSet", LoadBalancerID: classic, ForeignChange: true, Times: 1})
		_, err = updateClassic(classicSet("a"))
		serviceError(t, err, 412, "NoEtagMatch")
		if c := f.emu.Counters(); c.PreconditionFailed != 2 {
			t.Errorf("412s counted: %d, want 2", c.PreconditionFailed)
		}

		networkSet := func(name string) networkloadbalancer.GetBackendSetResponse {
			resp, err := f.nlb.GetBackendSet(f.context, networkloadbalancer.GetBackendSetRequest{NetworkLoadBalancerId: common.String(network), BackendSetName: &name})
			must(t, err)
			return resp
		}
		updateNetwork := func(set networkloadbalancer.GetBackendSetResponse) (networkloadbalancer.UpdateBackendSetResponse, error) {
			return f.nlb.UpdateBackendSet(f.context, networkloadbalancer.UpdateBackendSetRequest{NetworkLoadBalancerId: common.String(network),
				BackendSetName: set.Name, IfMatch: set.Etag, UpdateBackendSetDetails: networkloadbalancer.UpdateBackendSetDetails{}})
		}
		na, nb := networkSet("a"), networkSet("b")
		if *na.Etag == *nb.Etag {
			t.Fatalf("NLB backend sets share an etag")
		}
		nwrote, err := updateNetwork(na)
		must(t, err)
		f.waitNetwork(t, *nwrote.OpcWorkRequestId)
		_, err = updateNetwork(nb)
		must(t, err)
	})
}

// A write retried with the same opc-retry-token is answered with the first
// work request and changes nothing again; the token reused for a different
// request is refused.
func TestRetryTokenMakesWritesIdempotent(t *testing.T) {
	transports(t, slow, func(t *testing.T, f *fixture) {
		token := common.String("retry-token-1")
		req := networkloadbalancer.UpdateBackendSetRequest{NetworkLoadBalancerId: common.String(networkID), BackendSetName: common.String("tcp"),
			OpcRetryToken: token, UpdateBackendSetDetails: networkloadbalancer.UpdateBackendSetDetails{IsPreserveSource: common.Bool(false),
				Backends: []networkloadbalancer.BackendDetails{{IpAddress: common.String("10.0.1.1"), Port: common.Int(31000)}}}}
		first, err := f.nlb.UpdateBackendSet(f.context, req)
		must(t, err)
		again, err := f.nlb.UpdateBackendSet(f.context, req) // would be a 409 Conflict were it a new write
		must(t, err)
		if *again.OpcWorkRequestId != *first.OpcWorkRequestId {
			t.Errorf("retried write got work request %s, first got %s", *again.OpcWorkRequestId, *first.OpcWorkRequestId)
		}
		req.Backends = nil
		_, err = f.nlb.UpdateBackendSet(f.context, req)
		serviceError(t, err, 409, "InvalidatedRetryToken")

		set := f.classicSet(t)
		lbReq := loadbalancer.UpdateBackendSetRequest{LoadBalancerId: common.String(classicID), BackendSetName: common.String("web"),
			OpcRetryToken: token, UpdateBackendSetDetails: classicDetails(set.BackendSet)}
		lbFirst, err := f.lb.UpdateBackendSet(f.context, lbReq)
		must(t, err)
		lbAgain, err := f.lb.UpdateBackendSet(f.context, lbReq)
		must(t, err)
		if *lbAgain.OpcWorkRequestId != *lbFirst.OpcWorkRequestId {
			t.Errorf("retried classic write got a new work request")
		}
		if c := f.emu.Counters(); c.WorkRequests != 2 || c.Writes[networkID] != 1 || c.Writes[classicID] != 1 || c.Conflicts != 0 {
			t.Errorf("counters %+v", c)
		}
	})
}

func TestClassicBackendOperations(t *testing.T) {
	transports(t, ociemu.Options{}, func(t *testing.T, f *fixture) {
		ctx := f.context
		create, err := f.lb.CreateBackend(ctx, loadbalancer.CreateBackendRequest{LoadBalancerId: common.String(classicID), BackendSetName: common.String("web"),
			CreateBackendDetails: loadbalancer.CreateBackendDetails{IpAddress: common.String("10.0.2.1"), Port: common.Int(30000), Weight: common.Int(4)}})
		must(t, err)
		if wr := f.waitClassic(t, *create.OpcWorkRequestId); *wr.Type != "CreateBackend" || wr.LifecycleState != loadbalancer.WorkRequestLifecycleStateSucceeded {
			t.Fatalf("CreateBackend work request %s %s", *wr.Type, wr.LifecycleState)
		}
		got, err := f.lb.GetBackend(ctx, loadbalancer.GetBackendRequest{LoadBalancerId: common.String(classicID), BackendSetName: common.String("web"),
			BackendName: common.String("10.0.2.1:30000")})
		must(t, err)
		if *got.Weight != 4 || *got.Drain || got.ETag == nil {
			t.Errorf("created backend %v", got.Backend)
		}
		_, err = f.lb.CreateBackend(ctx, loadbalancer.CreateBackendRequest{LoadBalancerId: common.String(classicID), BackendSetName: common.String("web"),
			CreateBackendDetails: loadbalancer.CreateBackendDetails{IpAddress: common.String("10.0.2.1"), Port: common.Int(30000)}})
		serviceError(t, err, 409, "NotAuthorizedOrResourceAlreadyExists")

		update, err := f.lb.UpdateBackend(ctx, loadbalancer.UpdateBackendRequest{LoadBalancerId: common.String(classicID), BackendSetName: common.String("web"),
			BackendName: common.String("10.0.2.1:30000"), UpdateBackendDetails: loadbalancer.UpdateBackendDetails{
				Weight: common.Int(1), Backup: common.Bool(false), Drain: common.Bool(true), Offline: common.Bool(false)}})
		must(t, err)
		f.waitClassic(t, *update.OpcWorkRequestId)
		got, err = f.lb.GetBackend(ctx, loadbalancer.GetBackendRequest{LoadBalancerId: common.String(classicID), BackendSetName: common.String("web"),
			BackendName: common.String("10.0.2.1:30000")})
		must(t, err)
		if *got.Weight != 1 || !*got.Drain {
			t.Errorf("updated backend %v", got.Backend)
		}
		_, err = f.lb.UpdateBackend(ctx, loadbalancer.UpdateBackendRequest{LoadBalancerId: common.String(classicID), BackendSetName: common.String("web"),
			BackendName: common.String("10.0.2.1:30000"), UpdateBackendDetails: loadbalancer.UpdateBackendDetails{Weight: common.Int(1)}})
		serviceError(t, err, 400, "InvalidParameter")

		del, err := f.lb.DeleteBackend(ctx, loadbalancer.DeleteBackendRequest{LoadBalancerId: common.String(classicID), BackendSetName: common.String("web"),
			BackendName: common.String("10.0.2.1:30000")})
		must(t, err)
		f.waitClassic(t, *del.OpcWorkRequestId)
		backends, err := f.emu.Backends(classicID, "web")
		must(t, err)
		if len(backends) != 1 || backends[0].Name != "10.0.0.99:8080" {
			t.Errorf("after delete: %v", backends)
		}
	})
}

func TestNetworkBackendOperations(t *testing.T) {
	transports(t, ociemu.Options{}, func(t *testing.T, f *fixture) {
		ctx := f.context
		create, err := f.nlb.CreateBackend(ctx, networkloadbalancer.CreateBackendRequest{NetworkLoadBalancerId: common.String(networkID),
			BackendSetName: common.String("tcp"), CreateBackendDetails: networkloadbalancer.CreateBackendDetails{
				IpAddress: common.String("10.0.2.1"), Port: common.Int(30000), IsBackup: common.Bool(true)}})
		must(t, err)
		if create.RawResponse.StatusCode != http.StatusAccepted {
			t.Errorf("CreateBackend status %d", create.RawResponse.StatusCode)
		}
		if wr := f.waitNetwork(t, *create.OpcWorkRequestId); wr.OperationType != networkloadbalancer.OperationTypeCreateBackend {
			t.Errorf("CreateBackend work request type %s", wr.OperationType)
		}
		got, err := f.nlb.GetBackend(ctx, networkloadbalancer.GetBackendRequest{NetworkLoadBalancerId: common.String(networkID),
			BackendSetName: common.String("tcp"), BackendName: common.String("10.0.2.1:30000")})
		must(t, err)
		if *got.Weight != 1 || !*got.IsBackup || got.Etag == nil {
			t.Errorf("created backend %v", got.Backend)
		}
		_, err = f.nlb.CreateBackend(ctx, networkloadbalancer.CreateBackendRequest{NetworkLoadBalancerId: common.String(networkID),
			BackendSetName: common.String("tcp"), CreateBackendDetails: networkloadbalancer.CreateBackendDetails{
				Name: common.String("another-name"), IpAddress: common.String("10.0.2.1"), Port: common.Int(30000)}})
		serviceError(t, err, 409, "NotAuthorizedOrResourceAlreadyExists")
		_, err = f.nlb.CreateBackend(ctx, networkloadbalancer.CreateBackendRequest{NetworkLoadBalancerId: common.String(networkID),
			BackendSetName: common.String("tcp"), CreateBackendDetails: networkloadbalancer.CreateBackendDetails{Port: common.Int(30000)}})
		serviceError(t, err, 400, "InvalidParameter")

		update, err := f.nlb.UpdateBackend(ctx, networkloadbalancer.UpdateBackendRequest{NetworkLoadBalancerId: common.String(networkID),
			BackendSetName: common.String("tcp"), BackendName: common.String("10.0.2.1:30000"),
			UpdateBackendDetails: networkloadbalancer.UpdateBackendDetails{IsDrain: common.Bool(true)}})
		must(t, err)
		f.waitNetwork(t, *update.OpcWorkRequestId)
		got, err = f.nlb.GetBackend(ctx, networkloadbalancer.GetBackendRequest{NetworkLoadBalancerId: common.String(networkID),
			BackendSetName: common.String("tcp"), BackendName: common.String("10.0.2.1:30000")})
		must(t, err)
		if !*got.IsDrain || !*got.IsBackup {
			t.Errorf("UpdateBackend must change only the fields it sets: %v", got.Backend)
		}

		del, err := f.nlb.DeleteBackend(ctx, networkloadbalancer.DeleteBackendRequest{NetworkLoadBalancerId: common.String(networkID),
			BackendSetName: common.String("tcp"), BackendName: common.String("10.0.2.1:30000")})
		must(t, err)
		f.waitNetwork(t, *del.OpcWorkRequestId)
		backends, err := f.emu.Backends(networkID, "tcp")
		must(t, err)
		if len(backends) != 2 {
			t.Errorf("after delete: %v", backends)
		}
	})
}

// NLB backend set rules: a backend's address is of the backend set's IP
// version; a network load balancer preserving source and destination takes
// backends by instance only; backends are told apart by address and port
// and by instance and port (addresses compared as addresses); no write is
// taken while the network load balancer is FAILED or DELETING.
func TestNetworkBackendSetRules(t *testing.T) {
	transports(t, ociemu.Options{}, func(t *testing.T, f *fixture) {
		const rules, preserving, failed, deleting = "ocid1.networkloadbalancer.oc1.iad.rules", "ocid1.networkloadbalancer.oc1.iad.preserving",
			"ocid1.networkloadbalancer.oc1.iad.failed", "ocid1.networkloadbalancer.oc1.iad.deleting"
		hc := &networkloadbalancer.HealthChecker{Protocol: networkloadbalancer.HealthCheckProtocolsTcp, Port: common.Int(443)}
		nlb := func(id string, mutate func(*networkloadbalancer.NetworkLoadBalancer)) networkloadbalancer.NetworkLoadBalancer {
			n := networkloadbalancer.NetworkLoadBalancer{Id: common.String(id), BackendSets: map[string]networkloadbalancer.BackendSet{
				"v4": {HealthChecker: hc, IsPreserveSource: common.Bool(false)}, "v6": {HealthChecker: hc, IpVersion: networkloadbalancer.IpVersionIpv6},
				"source": {HealthChecker: hc}}}
			mutate(&n)
			return n
		}
		const nodeIP, podIP = "ocid1.privateip.oc1.iad.node", "ocid1.privateip.oc1.iad.pod"
		must(t, f.emu.SeedState(ociemu.Seed{Instances: []ociemu.Instance{{ID: "ocid1.instance.oc1.iad.a", VNICs: []ociemu.VNIC{
			{PrivateIPs: []ociemu.PrivateIP{{ID: nodeIP, IPAddress: "10.0.10.2"}}},
			{PrivateIPs: []ociemu.PrivateIP{{IPAddress: "10.0.20.2"}, {ID: podIP, IPAddress: "10.0.20.5"}}},
		}}}, NetworkLoadBalancers: []networkloadbalancer.NetworkLoadBalancer{
			nlb(rules, func(*networkloadbalancer.NetworkLoadBalancer) {}),
			nlb(preserving, func(n *networkloadbalancer.NetworkLoadBalancer) {
				n.IsPreserveSourceDestination = common.Bool(true)
				n.BackendSets["v4"] = networkloadbalancer.BackendSet{HealthChecker: hc}
			}),
			nlb(failed, func(n *networkloadbalancer.NetworkLoadBalancer) {
				n.LifecycleState = networkloadbalancer.LifecycleStateFailed
			}),
			nlb(deleting, func(n *networkloadbalancer.NetworkLoadBalancer) {
				n.LifecycleState = networkloadbalancer.LifecycleStateDeleting
			}),
		}}))
		byIP := func(ip string) networkloadbalancer.BackendDetails {
			return networkloadbalancer.BackendDetails{IpAddress: common.String(ip), Port: common.Int(80)}
		}
		byTarget := func(id string) networkloadbalancer.BackendDetails {
			return networkloadbalancer.BackendDetails{TargetId: common.String(id), Port: common.Int(80)}
		}
		update := func(lb, set string, backends ...networkloadbalancer.BackendDetails) error {
			version := networkloadbalancer.IpVersionIpv4
			if set == "v6" {
				version = networkloadbalancer.IpVersionIpv6
			}
			resp, err := f.nlb.UpdateBackendSet(f.context, networkloadbalancer.UpdateBackendSetRequest{NetworkLoadBalancerId: common.String(lb),
				BackendSetName: common.String(set), UpdateBackendSetDetails: networkloadbalancer.UpdateBackendSetDetails{
					IpVersion: version, IsPreserveSource: common.Bool(lb == preserving || set != "v4"), Backends: backends, HealthChecker: &networkloadbalancer.HealthCheckerDetails{Protocol: hc.Protocol, Port: hc.Port}}})
			if err == nil {
				f.waitNetwork(t, *resp.OpcWorkRequestId)
			}
			return err
		}
		create := func(lb, set string, d networkloadbalancer.BackendDetails) error {
			resp, err := f.nlb.CreateBackend(f.context, networkloadbalancer.CreateBackendRequest{NetworkLoadBalancerId: common.String(lb),
				BackendSetName: common.String(set), CreateBackendDetails: networkloadbalancer.CreateBackendDetails{
					IpAddress: d.IpAddress, TargetId: d.TargetId, Port: d.Port, Name: d.Name}})
			if err == nil {
				f.waitNetwork(t, *resp.OpcWorkRequestId)
			}
			return err
		}

		for _, refused := range []struct {
			set      string
			backends []networkloadbalancer.BackendDetails
		}{
			{"v4", []networkloadbalancer.BackendDetails{byIP("fd00::1")}},
			{"v6", []networkloadbalancer.BackendDetails{byIP("10.0.0.1")}},
			{"v4", []networkloadbalancer.BackendDetails{byIP("not-an-address")}},
			{"v4", []networkloadbalancer.BackendDetails{byIP("10.0.0.1"), byIP("10.0.0.1")}},
			{"v6", []networkloadbalancer.BackendDetails{byIP("fd00::1"), byIP("fd00:0:0::0001")}},
			{"v4", []networkloadbalancer.BackendDetails{byTarget("ocid1.instance.oc1.iad.a"), byTarget("ocid1.instance.oc1.iad.a")}},
			// An instance names its primary IPv4 address.
			{"v6", []networkloadbalancer.BackendDetails{byTarget("ocid1.instance.oc1.iad.a")}},
			{"v6", []networkloadbalancer.BackendDetails{{IpAddress: common.String("fd00::1"), TargetId: common.String("ocid1.instance.oc1.iad.a"), Port: common.Int(80)}}},
		} {
			serviceError(t, update(rules, refused.set, refused.backends...), 400, "InvalidParameter")
		}
		serviceError(t, create(rules, "v4", byIP("fd00::1")), 400, "InvalidParameter")
		must(t, update(rules, "v6", byIP("fd00::1"), byTarget("ocid1.ipv6.oc1.iad.a")))
		serviceError(t, create(rules, "v6", byIP("fd00:0::1")), 409, "NotAuthorizedOrResourceAlreadyExists")
		serviceError(t, create(rules, "v6", byTarget("ocid1.ipv6.oc1.iad.a")), 409, "NotAuthorizedOrResourceAlreadyExists")
		serviceError(t, create(rules, "v6", byTarget("ocid1.instance.oc1.iad.a")), 400, "InvalidParameter")

		serviceError(t, update(preserving, "v4", byIP("10.0.0.1")), 400, "InvalidParameter")
		serviceError(t, create(preserving, "v4", byIP("10.0.0.1")), 400, "InvalidParameter")
		must(t, update(preserving, "v4", byTarget("ocid1.instance.oc1.iad.a")))

		// A backend set preserving the client's source takes IPv4 backends
		// by instance or private IP, the address, when given, the private
		// IP's (IPv6 ones by address: "v6" above preserves it too).
		podByBoth := func(ip string) networkloadbalancer.BackendDetails {
			return networkloadbalancer.BackendDetails{IpAddress: common.String(ip), TargetId: common.String(podIP), Port: common.Int(80)}
		}
		serviceError(t, update(rules, "source", byIP("10.0.20.5")), 400, "InvalidParameter")
		serviceError(t, create(rules, "source", byIP("10.0.20.5")), 400, "InvalidParameter")
		serviceError(t, update(rules, "source", podByBoth("10.0.20.6")), 400, "InvalidParameter")
		serviceError(t, update(rules, "source", byTarget("ocid1.privateip.oc1.iad.unknown")), 400, "InvalidParameter")
		serviceError(t, update(rules, "v6", byTarget(podIP)), 400, "InvalidParameter")
		must(t, update(rules, "source", podByBoth("10.0.20.5"), byTarget(nodeIP)))
		serviceError(t, create(rules, "source", byTarget(podIP)), 409, "NotAuthorizedOrResourceAlreadyExists")

		for lb, state := range map[string]string{failed: "Failed", deleting: "Deleting"} {
			se := serviceError(t, update(lb, "v4", byIP("10.0.0.1")), 409, "Conflict")
			if want := "from " + state + " to Updating"; !strings.Contains(se.GetMessage(), want) {
				t.Errorf("write to a %s NLB: %q, want it to say %q", state, se.GetMessage(), want)
			}
		}
	})
}

// Options.BackendsPerBackendSet bounds a backend set: a write leaving more
// is 400 LimitExceeded and changes nothing; one leaving fewer passes.
func TestBackendsPerBackendSetLimit(t *testing.T) {
	transports(t, ociemu.Options{BackendsPerBackendSet: 2}, func(t *testing.T, f *fixture) {
		set := f.classicSet(t)
		three := classicDetails(set.BackendSet,
			loadbalancer.BackendDetails{IpAddress: common.String("10.0.3.1"), Port: common.Int(80)},
			loadbalancer.BackendDetails{IpAddress: common.String("10.0.3.2"), Port: common.Int(80)},
			loadbalancer.BackendDetails{IpAddress: common.String("10.0.3.3"), Port: common.Int(80)})
		_, err := f.lb.UpdateBackendSet(f.context, loadbalancer.UpdateBackendSetRequest{LoadBalancerId: common.String(classicID),
			BackendSetName: common.String("web"), UpdateBackendSetDetails: three})
		serviceError(t, err, 400, "LimitExceeded")
		two := three
		two.Backends = three.Backends[:2]
		resp, err := f.lb.UpdateBackendSet(f.context, loadbalancer.UpdateBackendSetRequest{LoadBalancerId: common.String(classicID),
			BackendSetName: common.String("web"), UpdateBackendSetDetails: two})
		must(t, err)
		f.waitClassic(t, *resp.OpcWorkRequestId)
		_, err = f.lb.CreateBackend(f.context, loadbalancer.CreateBackendRequest{LoadBalancerId: common.String(classicID),
			BackendSetName: common.String("web"), CreateBackendDetails: loadbalancer.CreateBackendDetails{IpAddress: common.String("10.0.3.3"), Port: common.Int(80)}})
		serviceError(t, err, 400, "LimitExceeded")

		nlbSet := f.networkSet(t)
		var backends []networkloadbalancer.BackendDetails
		for _, ip := range []string{"10.0.4.1", "10.0.4.2", "10.0.4.3"} {
			backends = append(backends, networkloadbalancer.BackendDetails{IpAddress: common.String(ip), Port: common.Int(80)})
		}
		_, err = f.nlb.UpdateBackendSet(f.context, networkloadbalancer.UpdateBackendSetRequest{NetworkLoadBalancerId: common.String(networkID),
			BackendSetName: common.String("tcp"), UpdateBackendSetDetails: networkloadbalancer.UpdateBackendSetDetails{
				Policy: common.String(string(nlbSet.Policy)), IsPreserveSource: common.Bool(false), Backends: backends}})
		serviceError(t, err, 400, "LimitExceeded")
	})
}
