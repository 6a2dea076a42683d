package scale_test

import (
	"context"
	"os"
	"runtime/pprof"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/peppy-ratio/lbregistrar/test/scale"
)

func TestNodesAreDistinctKubeletNodes(t *testing.T) {
	names, ips := map[string]bool{}, map[string]bool{}
	for _, obj := range scale.Nodes(5000) {
		n := obj.(*corev1.Node)
		names[n.Name], ips[n.Status.Addresses[0].Address] = true, true
		if n.Status.Addresses[0].Type != corev1.NodeInternalIP || n.Spec.ProviderID == "" || len(n.Status.Images) != 50 {
			t.Fatalf("%s: %v, provider %q, %d images", n.Name, n.Status.Addresses[0], n.Spec.ProviderID, len(n.Status.Images))
		}
	}
	if len(names) != 5000 || len(ips) != 5000 {
		t.Errorf("%d names and %d InternalIPs for 5000 nodes", len(names), len(ips))
	}
	if n := scale.Node(7); n.Name != scale.NodeName(7) || n.Status.Addresses[0].Address != scale.NodeIP(7) || n.Spec.ProviderID != scale.NodeInstance(7) {
		t.Errorf("Node(7) is %s at %s, %s", n.Name, n.Status.Addresses[0].Address, n.Spec.ProviderID)
	}
}

func TestProcessCosts(t *testing.T) {
	for _, pid := range []int{0, os.Getpid()} {
		rss, ok := scale.ResidentMiB(pid)
		if !ok {
			t.Skip("no /proc here")
		}
		cpu, ok := scale.CPUSeconds(pid)
		if !ok || rss <= 0 || cpu < 0 {
			t.Errorf("process %d: %v MiB resident, %v s of CPU (%v)", pid, rss, cpu, ok)
		}
	}
	if _, ok := scale.ResidentMiB(-1); ok {
		t.Error("a process that does not exist has a resident size")
	}
}

// TestCPUWindowTellsLabelsApart spins one goroutine labeled "busy" and one
// without a label, each for a CPU-bound while in spin, and finds both in
// the window, inside spin.
func TestCPUWindowTellsLabelsApart(t *testing.T) {
	w, err := scale.StartCPUWindow("process", "github.com/peppy-ratio/lbregistrar/test/scale_test.spin")
	if err != nil {
		t.Skip(err) // go test -cpuprofile already uses the profiler
	}
	// The same work on each side, not the same time: on a busy machine
	// (go test runs packages side by side) a spin for a given time gets
	// what CPU the others leave it.
	var sink [2]uint64
	var wg sync.WaitGroup
	wg.Go(func() {
		pprof.Do(context.Background(), pprof.Labels("process", "busy"), func(context.Context) { sink[0] = spin(1) })
	})
	wg.Go(func() { sink[1] = spin(2) })
	wg.Wait()
	cpu, err := w.Stop("")
	if err != nil {
		t.Fatal(err)
	}
	// Unlabeled contains the second side and whatever else ran (the runtime,
	// the test itself): the labeled side is about half, and each is seen.
	busy, none := cpu["busy"], cpu[""]
	if total := busy.All + none.All; busy.All < 0.05 || none.All < 0.05 || busy.All < total/4 || busy.All > total*3/4 {
		t.Errorf("CPU seconds by label: %v, want the same for \"busy\" as for none (%v)", cpu, sink)
	}
	if busy.Inside < busy.All*0.9 || none.Inside < 0.05 || none.Inside > none.All {
		t.Errorf("CPU seconds inside spin: %v, want nearly all of \"busy\"'s and some of the unlabeled", cpu)
	}
}

//go:noinline
func spin(seed uint64) uint64 {
	x := seed
	for range 200_000_000 {
		x = x*6364136223846793005 + 1442695040888963407
	}
	return x
}
