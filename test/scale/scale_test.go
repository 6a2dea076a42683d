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
// without a label, each for a CPU-bound while, and finds both in the window.
func TestCPUWindowTellsLabelsApart(t *testing.T) {
	w, err := scale.StartCPUWindow("process")
	if err != nil {
		t.Skip(err) // go test -cpuprofile holds the profiler
	}
	// The same work on each side, not the same time: on a busy machine
	// (go test runs packages side by side) a spin for a given time gets
	// what CPU the others leave it.
	var sink [2]uint64
	work := func(i int) {
		x := uint64(i + 1)
		for range 200_000_000 {
			x = x*6364136223846793005 + 1442695040888963407
		}
		sink[i] = x
	}
	var wg sync.WaitGroup
	wg.Go(func() {
		pprof.Do(context.Background(), pprof.Labels("process", "busy"), func(context.Context) { work(0) })
	})
	wg.Go(func() { work(1) })
	wg.Wait()
	cpu, err := w.Stop("")
	if err != nil {
		t.Fatal(err)
	}
	// Unlabeled holds the second side and whatever else ran (the runtime,
	// the test itself): the labeled side is about half, and each is seen.
	if busy, total := cpu["busy"], cpu["busy"]+cpu[""]; busy < 0.05 || cpu[""] < 0.05 || busy < total/4 || busy > total*3/4 {
		t.Errorf("CPU seconds by label: %v, want the same for \"busy\" as for none (%v)", cpu, sink)
	}
}
