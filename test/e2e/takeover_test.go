package e2e

import (
	"fmt"
	"maps"
	"net"
	"os/exec"
	"path"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/peppy-ratio/lbregistrar/api/v1beta1"
	"github.com/peppy-ratio/lbregistrar/api/validation"
	"github.com/peppy-ratio/lbregistrar/test/eventually"
	"github.com/peppy-ratio/lbregistrar/test/kube"
	"github.com/peppy-ratio/lbregistrar/test/ociemu"
)

const (
	takeoverClassic = "ocid1.loadbalancer.oc1.ap-tokyo-1.aaaaaaaatakeover"
	takeoverNetwork = "ocid1.networkloadbalancer.oc1.ap-tokyo-1.amaaaaaaw3qjxjtp6pcc5a2sf6vwhrr7eoxqvsmbm3tcfpgpqbexample"
)

// takeoverOwners is which resource of takeover-objects.yaml and
// config/samples/v1alpha1_two_resources_one_lb.yaml registers which backend
// sets of takeover-backends.yaml, by the compatibility contract. Nothing
// registers in the classic load balancer's web-canary, which web-weighted
// names only in the service.backendSetName the original operator ignored.
var takeoverOwners = map[string][]string{
	"web-weighted":              {takeoverClassic + "/web"},
	"web-api":                   {takeoverClassic + "/api", takeoverClassic + "/api-http"},
	"lbregistrar-ingress-https": {takeoverNetwork + "/ingress"},
	"lbregistrar-ingress-http":  {takeoverNetwork + "/ingress-http"},
}

// takeoverFiltered are the backend sets registered with filterByEndpoints.
var takeoverFiltered = []string{takeoverClassic + "/api-http"}

// lbregistrar takes over load balancers exactly as the original operator
// left them for its v1alpha1 objects (a classic and a network load balancer,
// each with two resources; a single service with weight: 5 and a
// service.backendSetName it ignored; a services item inheriting
// spec.weight; filterByEndpoints): no UpdateBackendSet, every resource
// Ready, each recording as its own the backends the original registered
// for it. A new node then costs one write per backend set that registers
// every node, with the weights as before. `lbregistrar migrate` merges each
// load balancer's two resources into one, which takes their backends over
// without a write, and deleting the old ones writes nothing either.
func TestTakeoverChangesNothing(t *testing.T) {
	t.Parallel()
	c := kube.Start(t, kube.Options{Bare: true})
	ctx := testContext(t)
	emu, _ := takeoverLeft(t, c)
	asLeft := emu.State()

	serve := newServeProcess()
	serve.startInstalled(t, c, c.Kubeconfig, nil, "--webhook-host=127.0.0.1", "--secret-namespaces="+kube.Namespace,
		"--oci-loadbalancer-endpoint="+emu.URL(), "--oci-networkloadbalancer-endpoint="+emu.URL(), "--oci-core-endpoint="+emu.URL())
	serve.waitReady(t)
	waitAllReady(t, c, len(takeoverOwners), 2*time.Minute)
	assertNoBackendSetUpdates(t, emu, "taking over")
	if diff := cmp.Diff(asLeft, emu.State()); diff != "" {
		t.Errorf("OCI changed during the takeover (-as left +now):\n%s", diff)
	}
	for name, sets := range takeoverOwners {
		assertOwns(t, c, emu, name, sets)
	}

	// A new node joins every backend set that does not filter by endpoints,
	// at the port and weight its backends already have.
	want, wantWrites := map[string][]string{}, map[string]int{}
	for _, sets := range takeoverOwners {
		for _, set := range sets {
			want[set] = registeredIn(t, emu, set)
			if !slices.Contains(takeoverFiltered, set) {
				want[set] = sortedWith(want[set], "10.0.0.3", want[set][0])
				wantWrites[set] = 1
			}
		}
	}
	emu.ResetCalls()
	addNode(t, c, "node-c", "10.0.0.3")
	waitRegistered(t, emu, want)
	waitAllReady(t, c, len(takeoverOwners), 2*time.Minute)
	if diff := cmp.Diff(wantWrites, backendSetUpdates(emu)); diff != "" {
		t.Errorf("UpdateBackendSet calls per backend set after a node joined (-want +got):\n%s", diff)
	}
	for name, sets := range takeoverOwners {
		assertOwns(t, c, emu, name, sets)
	}

	emu.ResetCalls()
	afterJoin := emu.State()
	var stderr strings.Builder
	migrate := exec.CommandContext(ctx, lbregistrar(t), "migrate", "--kubeconfig", c.Kubeconfig)
	migrate.Stderr = &stderr
	out, err := migrate.Output()
	if err != nil {
		t.Fatalf("lbregistrar migrate: %v\n%s", err, stderr.String())
	}
	replaced := replacedBy(t, string(out))
	var olds []string
	for _, names := range replaced {
		olds = append(olds, names...)
	}
	if slices.Sort(olds); len(replaced) != 2 || !slices.Equal(olds, slices.Sorted(maps.Keys(takeoverOwners))) {
		t.Fatalf("migrate merged %v, want each load balancer's two resources into one:\n%s", replaced, out)
	}
	kubectl(t, c, string(out), "apply", "-f", "-")
	waitReady(t, c, len(replaced), 2*time.Minute, func(name string) bool { _, merged := replaced[name]; return merged })
	for merged, old := range replaced {
		var sets []string
		for _, name := range old {
			sets = append(sets, takeoverOwners[name]...)
		}
		assertOwns(t, c, emu, merged, sets)
		kubectl(t, c, "", append([]string{"delete", "lbregistrar"}, old...)...)
	}
	waitAllReady(t, c, len(replaced), 2*time.Minute)
	assertNoBackendSetUpdates(t, emu, "merging and deleting the replaced resources")
	if diff := cmp.Diff(afterJoin, emu.State()); diff != "" {
		t.Errorf("OCI changed while merging (-before +after):\n%s", diff)
	}
}

// takeoverLeft makes c and an emulator what the original operator leaves
// behind for takeoverOwners: its CRD, takeover-objects.yaml and
// config/samples/v1alpha1_two_resources_one_lb.yaml stored (returned, as
// applied), their API key's Secret, the workload, and the load balancers as
// it registered them (takeover-backends.yaml).
func takeoverLeft(t *testing.T, c *kube.Cluster) (*ociemu.Emulator, string) {
	t.Helper()
	emu := seededEmulator(t, c.Root+"/test/testdata/takeover-backends.yaml", 0)
	kubectl(t, c, "", "create", "namespace", kube.Namespace)
	createWorkload(t, c)
	installOldOperatorCRD(t, c)
	objects := apiKeyFor(t, c, emu, testdata(t, "takeover-objects.yaml")+"\n---\n"+readRootFile(t, "config/samples/v1alpha1_two_resources_one_lb.yaml"))
	kubectl(t, c, objects, "apply", "-f", "-")
	return emu, objects
}

// registeredIn lists the backends of "loadBalancerId/backendSet" as sorted
// ip:port/weight.
func registeredIn(t *testing.T, emu *ociemu.Emulator, set string) []string {
	t.Helper()
	lb, name := path.Split(set)
	backends, err := emu.Backends(strings.TrimSuffix(lb, "/"), name)
	if err != nil {
		t.Fatal(err)
	}
	out := []string{}
	for _, b := range backends {
		out = append(out, fmt.Sprintf("%s/%d", net.JoinHostPort(b.IPAddress, strconv.Itoa(b.Port)), b.Weight))
	}
	slices.Sort(out)
	return out
}

// sortedWith is backends with an IPv4 address added at the port and weight of like.
func sortedWith(backends []string, ip, like string) []string {
	_, portAndWeight, _ := strings.Cut(like, ":")
	out := append(slices.Clone(backends), ip+":"+portAndWeight)
	slices.Sort(out)
	return out
}

// waitRegistered waits until every backend set has what want says.
func waitRegistered(t *testing.T, emu *ociemu.Emulator, want map[string][]string) {
	t.Helper()
	eventually.Passes(t, time.Minute, 100*time.Millisecond, func() error {
		got := map[string][]string{}
		for set := range want {
			got[set] = registeredIn(t, emu, set)
		}
		if diff := cmp.Diff(want, got); diff != "" {
			return fmt.Errorf("backend sets (-want +got):\n%s", diff)
		}
		return nil
	})
}

// backendSetUpdates counts the accepted UpdateBackendSet calls per
// "loadBalancerId/backendSet".
func backendSetUpdates(emu *ociemu.Emulator) map[string]int {
	out := map[string]int{}
	for _, call := range emu.Calls() {
		if call.Operation == "UpdateBackendSet" && call.Status < 300 {
			out[call.LoadBalancerID+"/"+path.Base(call.Path)]++
		}
	}
	return out
}

func assertNoBackendSetUpdates(t *testing.T, emu *ociemu.Emulator, while string) {
	t.Helper()
	for _, call := range emu.Calls() {
		if call.Operation == "UpdateBackendSet" {
			t.Errorf("UpdateBackendSet while %s: %s %s (%d)", while, call.Method, call.Path, call.Status)
		}
	}
}

// assertOwns checks that the resource records exactly the backend sets
// given, each with the backends OCI has there.
func assertOwns(t *testing.T, c *kube.Cluster, emu *ociemu.Emulator, name string, sets []string) {
	t.Helper()
	var r v1beta1.LBRegistrar
	if err := c.Client.Get(testContext(t), client.ObjectKey{Name: name}, &r); err != nil {
		t.Fatal(err)
	}
	want, got := map[string][]string{}, map[string][]string{}
	for _, set := range sets {
		want[set] = registeredIn(t, emu, set)
	}
	for _, rec := range r.Status.BackendSets {
		backends := []string{}
		for _, b := range rec.Owned() {
			backends = append(backends, fmt.Sprintf("%s/%d", net.JoinHostPort(b.IP, strconv.Itoa(int(b.Port))), b.Weight))
		}
		slices.Sort(backends)
		got[r.Spec.LoadBalancerID+"/"+rec.Name] = backends
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("%s: ownership record (-OCI +recorded):\n%s", name, diff)
	}
}

// replacedBy reads migrate's output: each merged resource and the names it replaces.
func replacedBy(t *testing.T, out string) map[string][]string {
	t.Helper()
	merged := map[string][]string{}
	for _, doc := range strings.Split(out, "\n---\n") {
		var r v1beta1.LBRegistrar
		if err := yaml.Unmarshal([]byte(doc), &r); err != nil {
			t.Fatalf("migrate output: %v\n%s", err, doc)
		}
		if names := r.Annotations[validation.ReplacesAnnotation]; names != "" {
			merged[r.Name] = strings.Split(names, ",")
		}
	}
	return merged
}
