// Package scale builds the objects of a large cluster as the components that
// write them do, for the benchmarks that measure the controller at scale
// (test/e2e's BenchmarkCacheMemory, reconciler's BenchmarkScale): nodes as
// kubelets register them, and Create, which writes any such objects into an
// API server the way those components do; and what a process costs
// (ResidentMiB, CPUSeconds), how busy the machine is (MachineBusy,
// AwaitIdleMachine), what an API server spends (WatchAPIServer,
// StatusWrites), and what the emulator was asked (FirstWrites, ResyncsOf).
package scale

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// NodeName is the name of Node(i).
func NodeName(i int) string { return fmt.Sprintf("node-%04d", i) }

// NodeIP is Node(i)'s InternalIP, distinct for i below 62,500.
func NodeIP(i int) string { return fmt.Sprintf("10.0.%d.%d", i/250, i%250+2) }

// NodeInstance is Node(i)'s instance OCID, as spec.providerID names it.
func NodeInstance(i int) string {
	return "ocid1.instance.oc1.ap-tokyo-1.anxhiljr" + fmt.Sprintf("%052d", i)
}

// PoolLabel names a node's OKE node pool, and NodePools is how many pools
// the nodes are in, every NodePools-th node in one: 5,000 nodes make pools
// of at most 148, so that one pool registered into 3 backend sets of a
// classic load balancer stays within the 512 backends OCI lets it have
// in all, below the nine tenths the controller warns at.
const (
	PoolLabel = "oke.oraclecloud.com/pool.name"
	NodePools = 34
)

// Pool is the pool Node(i) is in.
func Pool(i int) string { return "pool-" + strconv.Itoa(i%NodePools) }

// Node is a node as a cloud kubelet registers it: a dozen labels, a dozen
// conditions (kubelet's and a node problem detector's), 50 images, capacity
// and system info. It is Ready.
func Node(i int) *corev1.Node {
	name := NodeName(i)
	zone := "ap-tokyo-1-ad-" + strconv.Itoa(i%3+1)
	n := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name: name,
			Labels: map[string]string{
				"kubernetes.io/hostname": name, "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64",
				"beta.kubernetes.io/os": "linux", "beta.kubernetes.io/arch": "amd64",
				"node.kubernetes.io/instance-type": "VM.Standard.E4.Flex", "beta.kubernetes.io/instance-type": "VM.Standard.E4.Flex",
				"topology.kubernetes.io/region": "ap-tokyo-1", "topology.kubernetes.io/zone": zone,
				"failure-domain.beta.kubernetes.io/zone": zone, PoolLabel: Pool(i),
				"node.info/compartment.id_prefix": "ocid1.compartment.oc1",
			},
			Annotations: map[string]string{
				"node.alpha.kubernetes.io/ttl":                           "0",
				"volumes.kubernetes.io/controller-managed-attach-detach": "true",
				"csi.volume.kubernetes.io/nodeid":                        `{"blockvolume.csi.oraclecloud.com":"` + name + `"}`,
			},
		},
		Spec: corev1.NodeSpec{
			ProviderID: NodeInstance(i),
			PodCIDR:    fmt.Sprintf("10.%d.%d.0/24", 64+i/256, i%256), PodCIDRs: []string{fmt.Sprintf("10.%d.%d.0/24", 64+i/256, i%256)},
		},
		Status: corev1.NodeStatus{
			Addresses: []corev1.NodeAddress{
				{Type: corev1.NodeInternalIP, Address: NodeIP(i)},
				{Type: corev1.NodeExternalIP, Address: fmt.Sprintf("192.0.%d.%d", i/250, i%250+2)},
				{Type: corev1.NodeHostName, Address: name},
			},
			Capacity:    resourceList("64", "263504348Ki", "110", "47227284Ki"),
			Allocatable: resourceList("63800m", "252018652Ki", "110", "43524605Ki"),
			NodeInfo: corev1.NodeSystemInfo{
				MachineID: fmt.Sprintf("%032x", i), SystemUUID: fmt.Sprintf("%08x-0000-0000-0000-000000000000", i), BootID: fmt.Sprintf("%08x-1111-1111-1111-111111111111", i),
				KernelVersion: "5.15.0-208.159.3.2.el8uek.x86_64", OSImage: "Oracle Linux Server 8.10", ContainerRuntimeVersion: "cri-o://1.31.1",
				KubeletVersion: "v1.31.1", OperatingSystem: "linux", Architecture: "amd64",
			},
			DaemonEndpoints: corev1.NodeDaemonEndpoints{KubeletEndpoint: corev1.DaemonEndpoint{Port: 10250}},
		},
	}
	since := metav1.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for j, t := range []string{
		"Ready", "MemoryPressure", "DiskPressure", "PIDPressure", "NetworkUnavailable",
		"KernelDeadlock", "ReadonlyFilesystem", "FrequentKubeletRestart", "FrequentContainerdRestart",
		"FrequentDockerRestart", "CorruptDockerOverlay2", "FilesystemCorruptionProblem",
	} {
		status, reason := corev1.ConditionFalse, "No"+t
		if j == 0 {
			status, reason = corev1.ConditionTrue, "KubeletReady"
		}
		n.Status.Conditions = append(n.Status.Conditions, corev1.NodeCondition{
			Type: corev1.NodeConditionType(t), Status: status, Reason: reason,
			Message: "the node problem detector found no " + t + " on " + name, LastHeartbeatTime: since, LastTransitionTime: since,
		})
	}
	for j := range 50 {
		repo := fmt.Sprintf("ap-tokyo-1.ocir.io/tenancy/team-%d/service-%02d", j%7, j)
		n.Status.Images = append(n.Status.Images, corev1.ContainerImage{
			Names:     []string{repo + "@sha256:" + fmt.Sprintf("%064x", j), repo + ":v1." + strconv.Itoa(j) + ".0"},
			SizeBytes: int64(50_000_000 + j*1_000_000),
		})
	}
	return n
}

// Nodes are Node(0) to Node(n-1).
func Nodes(n int) []client.Object {
	out := make([]client.Object, n)
	for i := range out {
		out[i] = Node(i)
	}
	return out
}

func resourceList(cpu, memory, pods, storage string) corev1.ResourceList {
	return corev1.ResourceList{
		corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(memory),
		corev1.ResourcePods: resource.MustParse(pods), corev1.ResourceEphemeralStorage: resource.MustParse(storage),
	}
}

// Create creates objects, eight at a time, without a client-side rate limit
// and in protobuf, as the components that write them do, each writer named
// in managedFields as in a cluster (WriterOf). Node status is kept on
// create, as kubelets register. The objects are of built-in kinds.
func Create(ctx context.Context, cfg *rest.Config, objects []client.Object) error {
	cfg = rest.CopyConfig(cfg)
	cfg.QPS, cfg.ContentType = -1, "application/vnd.kubernetes.protobuf"
	c, err := client.New(cfg, client.Options{}) // client-go's scheme
	if err != nil {
		return err
	}
	work := make(chan client.Object)
	errs := make(chan error, 8)
	var wg sync.WaitGroup
	for range cap(errs) {
		wg.Go(func() {
			for obj := range work {
				if err := c.Create(ctx, obj, client.FieldOwner(WriterOf(obj))); err != nil {
					errs <- fmt.Errorf("creating %T %s: %w", obj, obj.GetName(), err)
					return
				}
			}
		})
	}
	var failed error
feed:
	for _, obj := range objects {
		select {
		case work <- obj:
		case failed = <-errs:
			break feed
		}
	}
	close(work)
	wg.Wait()
	if failed != nil {
		return failed
	}
	select {
	case err := <-errs:
		return err
	default:
		return nil
	}
}

// WriterOf is the field manager that writes obj in a cluster.
func WriterOf(obj client.Object) string {
	switch obj.(type) {
	case *corev1.Node:
		return "kubelet"
	case *discoveryv1.EndpointSlice:
		return "endpointslice-controller"
	default:
		return "kubectl-client-side-apply"
	}
}

// ResidentMiB is the resident memory (VmRSS) of process pid, or of this
// process when pid is 0, in MiB, where /proc has it.
func ResidentMiB(pid int) (float64, bool) {
	status, err := os.ReadFile(procFile(pid, "status"))
	if err != nil {
		return 0, false
	}
	for line := range bytes.Lines(status) {
		if rest, ok := bytes.CutPrefix(line, []byte("VmRSS:")); ok {
			var kib float64
			if _, err := fmt.Sscanf(string(rest), "%f kB", &kib); err == nil {
				return kib / 1024, true
			}
		}
	}
	return 0, false
}

// CPUSeconds is the CPU time (user and system) process pid, or this
// process when pid is 0, has used, where /proc has it.
func CPUSeconds(pid int) (float64, bool) {
	stat, err := os.ReadFile(procFile(pid, "stat"))
	if err != nil {
		return 0, false
	}
	// Fields after the command, which is in parentheses and may contain spaces.
	_, rest, ok := bytes.Cut(stat, []byte(") "))
	fields := strings.Fields(string(rest))
	if !ok || len(fields) < 13 {
		return 0, false
	}
	utime, err1 := strconv.ParseFloat(fields[11], 64)
	stime, err2 := strconv.ParseFloat(fields[12], 64)
	if err1 != nil || err2 != nil {
		return 0, false
	}
	const clockTicks = 100 // USER_HZ, 100 on every Linux architecture Go supports
	return (utime + stime) / clockTicks, true
}

func procFile(pid int, name string) string {
	if pid == 0 {
		return "/proc/self/" + name
	}
	return "/proc/" + strconv.Itoa(pid) + "/" + name
}

// MachineBusy is how many of the machine's cores were busy, on average,
// over the window: 0 idle, up to runtime.NumCPU(). ok is false where
// /proc/stat is not there.
func MachineBusy(window time.Duration) (busy float64, ok bool) {
	idle0, total0, ok0 := machineTicks()
	time.Sleep(window)
	idle1, total1, ok1 := machineTicks()
	if !ok0 || !ok1 || total1 <= total0 {
		return 0, false
	}
	return float64(runtime.NumCPU()) * (1 - (idle1-idle0)/(total1-total0)), true
}

// machineTicks are the idle (idle and iowait) and all clock ticks of the
// machine's cores so far, from /proc/stat's cpu line.
func machineTicks() (idle, total float64, ok bool) {
	stat, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, 0, false
	}
	line, _, _ := bytes.Cut(stat, []byte("\n"))
	fields := strings.Fields(string(line))
	if len(fields) < 8 || fields[0] != "cpu" {
		return 0, 0, false
	}
	for i, f := range fields[1:8] { // user nice system idle iowait irq softirq
		v, err := strconv.ParseFloat(f, 64)
		if err != nil {
			return 0, 0, false
		}
		total += v
		if i == 3 || i == 4 {
			idle += v
		}
	}
	return idle, total, true
}
