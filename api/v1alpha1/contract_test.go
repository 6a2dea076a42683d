package v1alpha1

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/peppy-ratio/lbregistrar/api/v1beta1"
)

// The compatibility contract, v1alpha1 side: for each way a stored v1alpha1
// spec names its targets, what the original operator registered and what
// lbregistrar registers. A row's ID is its row in docs/migration.md
// ("Compatibility contract"), which names the original's function it was
// read from. Specs are as stored: the CRD default weight: 1 already applied
// wherever the writer left a weight out.
func TestContractTargets(t *testing.T) {
	https := intstr.FromString("https")
	http2 := intstr.FromString("http2")
	svc := func(port intstr.IntOrString, backendSet string, weight int) ServiceSpec {
		return ServiceSpec{Name: "gw", Namespace: "istio-system", Port: port, BackendSetName: backendSet, Weight: weight}
	}
	target := func(port intstr.IntOrString, backendSet string, weight int32) v1beta1.Target {
		return v1beta1.Target{Name: "gw", Namespace: "istio-system", Port: &port, BackendSetName: backendSet, Weight: weight}
	}
	fixed := func(port int32, backendSet string, weight int32) v1beta1.Target {
		return v1beta1.Target{NodePort: port, BackendSetName: backendSet, Weight: weight}
	}

	tests := []struct {
		row  string
		spec LBRegistrarSpec
		// original is what the original operator registered: one write per
		// target, with its backend set, port source and weight.
		original []v1beta1.Target
		// why is set when lbregistrar differs on purpose; lbregistrar is then
		// what it registers instead.
		why         string
		lbregistrar []v1beta1.Target
	}{{
		row: "T1 a non-empty services list is used; service, nodePort and port are ignored",
		spec: LBRegistrarSpec{
			Services:       []ServiceSpec{svc(https, "a", 1), svc(http2, "b", 3)},
			Service:        &ServiceSpec{Name: "ignored", Namespace: "x", Port: intstr.FromInt32(80), Weight: 1},
			NodePort:       30080,
			Port:           30443,
			BackendSetName: "top",
			Weight:         1,
		},
		original: []v1beta1.Target{target(https, "a", 1), target(http2, "b", 3)},
	}, {
		row:      "T2 a services item without backendSetName uses spec.backendSetName",
		spec:     LBRegistrarSpec{Services: []ServiceSpec{svc(https, "", 1)}, BackendSetName: "top", Weight: 1},
		original: []v1beta1.Target{target(https, "top", 1)},
	}, {
		row:      "T3 a services item's own backendSetName wins over spec.backendSetName",
		spec:     LBRegistrarSpec{Services: []ServiceSpec{svc(https, "own", 1)}, BackendSetName: "top", Weight: 1},
		original: []v1beta1.Target{target(https, "own", 1)},
	}, {
		row:      "T4 a single service registers with spec.backendSetName; service.backendSetName is ignored",
		spec:     LBRegistrarSpec{Service: &ServiceSpec{Name: "gw", Namespace: "istio-system", Port: https, BackendSetName: "own", Weight: 1}, BackendSetName: "top", Weight: 1},
		original: []v1beta1.Target{target(https, "top", 1)},
	}, {
		row:         "T5 a single service without spec.backendSetName uses service.backendSetName",
		spec:        LBRegistrarSpec{Service: &ServiceSpec{Name: "gw", Namespace: "istio-system", Port: https, BackendSetName: "own", Weight: 1}, Weight: 1},
		original:    nil,
		why:         "the original's CRD required spec.backendSetName; this project's v1alpha1 schema does not, and the service's own is the only backend set named",
		lbregistrar: []v1beta1.Target{target(https, "own", 1)},
	}, {
		row:      "T6 a single service wins over nodePort and port",
		spec:     LBRegistrarSpec{Service: &ServiceSpec{Name: "gw", Namespace: "istio-system", Port: https, Weight: 1}, NodePort: 30080, Port: 30443, BackendSetName: "top", Weight: 1},
		original: []v1beta1.Target{target(https, "top", 1)},
	}, {
		row:      "T7 an empty services list falls through to the single service",
		spec:     LBRegistrarSpec{Services: []ServiceSpec{}, Service: &ServiceSpec{Name: "gw", Namespace: "istio-system", Port: https, Weight: 1}, BackendSetName: "top", Weight: 1},
		original: []v1beta1.Target{target(https, "top", 1)},
	}, {
		row:      "T8 nodePort alone is one fixed port with spec.backendSetName and spec.weight",
		spec:     LBRegistrarSpec{NodePort: 30080, BackendSetName: "top", Weight: 3},
		original: []v1beta1.Target{fixed(30080, "top", 3)},
	}, {
		row:      "T9 port alone is one fixed port",
		spec:     LBRegistrarSpec{Port: 30443, BackendSetName: "top", Weight: 1},
		original: []v1beta1.Target{fixed(30443, "top", 1)},
	}, {
		row:      "T10 port wins when both port and nodePort are set",
		spec:     LBRegistrarSpec{NodePort: 30080, Port: 30443, BackendSetName: "top", Weight: 1},
		original: []v1beta1.Target{fixed(30443, "top", 1)},
	}, {
		row:         "T11 no target at all",
		spec:        LBRegistrarSpec{BackendSetName: "top", Weight: 1},
		original:    []v1beta1.Target{fixed(0, "top", 1)},
		why:         "the original registered every node at port 0; that is no registration, and admission refuses a new object without a target",
		lbregistrar: nil,
	}, {
		row:         "B1 spec.backendSetName beside services items that all name their own is not read",
		spec:        LBRegistrarSpec{Services: []ServiceSpec{svc(https, "a", 1)}, BackendSetName: "no-such-set", Weight: 1},
		original:    nil,
		why:         "the original read spec.backendSetName before registering anything and stayed PENDING while it did not exist; no item registers there",
		lbregistrar: []v1beta1.Target{target(https, "a", 1)},
	}, {
		row:      "W1 a weight left out is stored as 1 at both levels and registers 1",
		spec:     LBRegistrarSpec{NodePort: 30080, BackendSetName: "top", Weight: 1},
		original: []v1beta1.Target{fixed(30080, "top", 1)},
	}, {
		row:      "W2 a services item's stored weight 1 wins over spec.weight",
		spec:     LBRegistrarSpec{Services: []ServiceSpec{svc(https, "a", 1)}, Weight: 5},
		original: []v1beta1.Target{target(https, "a", 1)},
	}, {
		row:      "W3 a services item's weight above 0 wins over spec.weight",
		spec:     LBRegistrarSpec{Services: []ServiceSpec{svc(https, "a", 3)}, Weight: 5},
		original: []v1beta1.Target{target(https, "a", 3)},
	}, {
		row:      "W4 a services item with weight 0 or negative takes spec.weight",
		spec:     LBRegistrarSpec{Services: []ServiceSpec{svc(https, "a", 0), svc(http2, "b", -2)}, Weight: 5},
		original: []v1beta1.Target{target(https, "a", 5), target(http2, "b", 5)},
	}, {
		row:      "W5 a single service registers spec.weight; service.weight, the stored 1 included, is ignored",
		spec:     LBRegistrarSpec{Service: &ServiceSpec{Name: "gw", Namespace: "istio-system", Port: https, Weight: 1}, BackendSetName: "top", Weight: 5},
		original: []v1beta1.Target{target(https, "top", 5)},
	}, {
		row:         "W6 spec.weight 0 for a fixed port",
		spec:        LBRegistrarSpec{NodePort: 30080, BackendSetName: "top", Weight: 0},
		original:    []v1beta1.Target{fixed(30080, "top", 0)},
		why:         weightOutOfRange,
		lbregistrar: []v1beta1.Target{fixed(30080, "top", 1)},
	}, {
		row:         "W7 spec.weight 0 for a single service falls back to service.weight",
		spec:        LBRegistrarSpec{Service: &ServiceSpec{Name: "gw", Namespace: "istio-system", Port: https, Weight: 4}, BackendSetName: "top", Weight: 0},
		original:    []v1beta1.Target{target(https, "top", 0)},
		why:         weightOutOfRange,
		lbregistrar: []v1beta1.Target{target(https, "top", 4)},
	}, {
		row:         "W8 a negative weight everywhere (the original's CRD had no minimum)",
		spec:        LBRegistrarSpec{Services: []ServiceSpec{svc(https, "a", -1)}, Weight: -3},
		original:    []v1beta1.Target{target(https, "a", -3)},
		why:         weightOutOfRange,
		lbregistrar: []v1beta1.Target{target(https, "a", 1)},
	}}
	for _, tt := range tests {
		t.Run(tt.row, func(t *testing.T) {
			want := tt.original
			if tt.why != "" {
				want = tt.lbregistrar
				if diff := cmp.Diff(tt.original, tt.lbregistrar, cmpOptions...); diff == "" {
					t.Fatalf("row gives a reason to differ but does not differ")
				}
			}
			tt.spec.LoadBalancerID = lbID
			got := NormalizeSpec(&tt.spec)
			if diff := cmp.Diff(want, got.Services, cmpOptions...); diff != "" {
				t.Errorf("targets (-want +got):\n%s", diff)
			}
		})
	}
}

// weightOutOfRange is why a weight the original wrote below 1 is registered as 1.
const weightOutOfRange = "OCI documents backend weights from 1 to 100 and the v1beta1 weight has that range; 1 is the weight the original's CRD defaulted to"

// contractRowID finds the ID a contract test row starts with, or that a
// test outside the tables names in a comment.
var contractRowID = regexp.MustCompile(`(?:row: +"|[Cc]ontract row )([A-Z][0-9]+)[ :]`)

// Every row of the contract table in docs/migration.md has a test row, and
// every test row a row in the table.
func TestContractTableHasATestPerRow(t *testing.T) {
	root := filepath.Join("..", "..")
	doc, err := os.ReadFile(filepath.Join(root, "docs", "migration.md"))
	if err != nil {
		t.Fatal(err)
	}
	var documented []string
	for _, line := range strings.Split(string(doc), "\n") {
		if m := regexp.MustCompile(`^\| ([A-Z][0-9]+) \|`).FindStringSubmatch(line); m != nil {
			documented = append(documented, m[1])
		}
	}
	if len(documented) == 0 {
		t.Fatal("docs/migration.md has no contract table rows")
	}
	var tested []string
	for _, file := range []string{"api/v1alpha1/contract_test.go", "reconciler/desired/contract_test.go", "reconciler/reconciler_test.go"} {
		src, err := os.ReadFile(filepath.Join(root, file))
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range contractRowID.FindAllStringSubmatch(string(src), -1) {
			tested = append(tested, m[1])
		}
	}
	for _, id := range documented {
		if !slices.Contains(tested, id) {
			t.Errorf("contract row %s has no test row", id)
		}
	}
	for _, id := range tested {
		if !slices.Contains(documented, id) {
			t.Errorf("test row %s is not in the contract table", id)
		}
	}
}
