package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"runtime"
	"runtime/debug"
	"strconv"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/peppy-ratio/lbregistrar/reconciler"
	"github.com/peppy-ratio/lbregistrar/test/kube"
)

// The cluster BenchmarkCacheMemory fills: node objects as kubelets write
// them, and Services with EndpointSlices as the EndpointSlice controller
// writes them.
const (
	memoryNodes             = 5000
	memoryServices          = 1000
	memorySlicesPerService  = 10
	memoryEndpointsPerSlice = 10
	// envtest's Service range is a /24: only this many Services get a
	// cluster IP (and a node port); the rest are headless.
	memoryNodePortServices = 200
)

var (
	memoryClusterOnce sync.Once
	memoryCluster     *kube.Cluster // stopped by TestMain
	memoryClusterErr  error
)

// BenchmarkCacheMemory starts a controller-runtime cache with the informers
// the controller watches (nodes, Services, EndpointSlices) against an API
// server holding 5,000 nodes and 10,000 EndpointSlices of 1,000 Services,
// waits for it to sync, collects garbage and reports the heap it holds
// (heap-MiB) and the test process's resident memory (rss-MiB, the whole
// process, after returning free memory to the system). The baseline caches
// whole objects; trimmed is the controller's cache (reconciler.CacheOptions),
// with heap-x-baseline its share of the baseline's heap. ns/op is the time
// to start and sync.
func BenchmarkCacheMemory(b *testing.B) {
	cfg := populatedCluster(b).Config
	var baselineHeap float64
	b.Run("5000-nodes/baseline", func(b *testing.B) {
		for b.Loop() {
			baselineHeap = measureCache(b, cfg, cache.Options{})
		}
	})
	b.Run("5000-nodes/trimmed", func(b *testing.B) {
		var heap float64
		for b.Loop() {
			heap = measureCache(b, cfg, reconciler.CacheOptions())
		}
		if baselineHeap > 0 {
			b.ReportMetric(heap/baselineHeap, "heap-x-baseline")
		}
	})
}

// measureCache starts a cache with opts, waits for it, reports its heap
// and the process's RSS, stops it, and returns the heap in MiB.
func measureCache(b *testing.B, cfg *rest.Config, opts cache.Options) float64 {
	b.Helper()
	b.StopTimer()
	before := liveHeap()
	b.StartTimer()
	opts.Scheme = kube.NewScheme()
	c, err := cache.New(cfg, opts)
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	for _, obj := range []client.Object{&corev1.Node{}, &corev1.Service{}, &discoveryv1.EndpointSlice{}} {
		if _, err := c.GetInformer(ctx, obj); err != nil {
			b.Fatal(err)
		}
	}
	done := make(chan error, 1)
	go func() { done <- c.Start(ctx) }()
	if !c.WaitForCacheSync(ctx) {
		b.Fatal("the cache did not sync")
	}
	b.StopTimer()
	heap := float64(liveHeap()-before) / (1 << 20)
	b.ReportMetric(heap, "heap-MiB")
	if rss, ok := residentMiB(); ok {
		b.ReportMetric(rss, "rss-MiB")
	}
	var nodes corev1.NodeList
	if err := c.List(ctx, &nodes); err != nil || len(nodes.Items) != memoryNodes {
		b.Fatalf("the cache holds %d nodes (%v), want %d", len(nodes.Items), err, memoryNodes)
	}
	cancel()
	if err := <-done; err != nil {
		b.Fatal(err)
	}
	b.StartTimer()
	return heap
}

// liveHeap is the heap in use after a full collection, with free memory
// returned to the system so that RSS follows it.
func liveHeap() uint64 {
	debug.FreeOSMemory() // collects garbage first
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapInuse
}

// residentMiB is the process's VmRSS from /proc/self/status, where there is one.
func residentMiB() (float64, bool) {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return 0, false
	}
	defer func() { _ = f.Close() }()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := bytes.CutPrefix(sc.Bytes(), []byte("VmRSS:")); ok {
			var kib float64
			if _, err := fmt.Sscanf(string(rest), "%f kB", &kib); err == nil {
				return kib / 1024, true
			}
		}
	}
	return 0, false
}

// populatedCluster is an API server of its own holding the objects, filled
// once per test binary, since that takes a while.
func populatedCluster(b *testing.B) *kube.Cluster {
	b.Helper()
	memoryClusterOnce.Do(func() {
		ctx := context.Background()
		if memoryCluster, memoryClusterErr = kube.StartEnv(ctx, kube.Options{Bare: true}); memoryClusterErr != nil {
			return
		}
		memoryClusterErr = fill(ctx, memoryCluster.Config)
	})
	if memoryClusterErr != nil {
		b.Fatal(memoryClusterErr)
	}
	return memoryCluster
}

// fill creates the nodes, Services and EndpointSlices, a few at a time,
// without a client-side rate limit and in protobuf, as the components that
// write them do.
func fill(ctx context.Context, cfg *rest.Config) error {
	cfg = rest.CopyConfig(cfg)
	cfg.QPS, cfg.ContentType = -1, "application/vnd.kubernetes.protobuf"
	c, err := client.New(cfg, client.Options{Scheme: kube.NewScheme()})
	if err != nil {
		return err
	}
	var objects []client.Object
	for i := range memoryNodes {
		objects = append(objects, realisticNode(i))
	}
	for i := range memoryServices {
		svc, slices := realisticService(i)
		objects = append(objects, svc)
		for _, s := range slices {
			objects = append(objects, s)
		}
	}
	work := make(chan client.Object)
	errs := make(chan error, 8)
	var wg sync.WaitGroup
	for range cap(errs) {
		wg.Go(func() {
			for obj := range work {
				// Each writer is named, as in a cluster, in managedFields.
				if err := c.Create(ctx, obj, client.FieldOwner(writerOf(obj))); err != nil {
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
	}
	// Node status is kept on create, as kubelets register; make sure.
	var node corev1.Node
	if err := c.Get(ctx, client.ObjectKey{Name: "node-0000"}, &node); err != nil {
		return err
	}
	if len(node.Status.Images) == 0 || len(node.ManagedFields) == 0 {
		return fmt.Errorf("node-0000 was stored without its status or managed fields: %d images, %d managed fields", len(node.Status.Images), len(node.ManagedFields))
	}
	return nil
}

func writerOf(obj client.Object) string {
	switch obj.(type) {
	case *corev1.Node:
		return "kubelet"
	case *discoveryv1.EndpointSlice:
		return "endpointslice-controller"
	default:
		return "kubectl-client-side-apply"
	}
}

// realisticNode is a node as a cloud kubelet registers it: a dozen labels,
// a dozen conditions (kubelet's and a node problem detector's), 50 images,
// capacity and system info.
func realisticNode(i int) *corev1.Node {
	name := fmt.Sprintf("node-%04d", i)
	zone := "ap-tokyo-1-ad-" + strconv.Itoa(i%3+1)
	n := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name: name,
			Labels: map[string]string{
				"kubernetes.io/hostname": name, "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64",
				"beta.kubernetes.io/os": "linux", "beta.kubernetes.io/arch": "amd64",
				"node.kubernetes.io/instance-type": "VM.Standard.E4.Flex", "beta.kubernetes.io/instance-type": "VM.Standard.E4.Flex",
				"topology.kubernetes.io/region": "ap-tokyo-1", "topology.kubernetes.io/zone": zone,
				"failure-domain.beta.kubernetes.io/zone": zone, "oke.oraclecloud.com/pool.name": "pool-" + strconv.Itoa(i%10),
				"node.info/compartment.id_prefix": "ocid1.compartment.oc1",
			},
			Annotations: map[string]string{
				"node.alpha.kubernetes.io/ttl":                           "0",
				"volumes.kubernetes.io/controller-managed-attach-detach": "true",
				"csi.volume.kubernetes.io/nodeid":                        `{"blockvolume.csi.oraclecloud.com":"` + name + `"}`,
			},
		},
		Spec: corev1.NodeSpec{
			ProviderID: "ocid1.instance.oc1.ap-tokyo-1.anxhiljr" + fmt.Sprintf("%052d", i),
			PodCIDR:    fmt.Sprintf("10.%d.%d.0/24", 64+i/256, i%256), PodCIDRs: []string{fmt.Sprintf("10.%d.%d.0/24", 64+i/256, i%256)},
		},
		Status: corev1.NodeStatus{
			Addresses: []corev1.NodeAddress{
				{Type: corev1.NodeInternalIP, Address: fmt.Sprintf("10.0.%d.%d", i/250, i%250+2)},
				{Type: corev1.NodeExternalIP, Address: fmt.Sprintf("192.0.%d.%d", i/250, i%250+2)},
				{Type: corev1.NodeHostName, Address: name},
			},
			Capacity:    resourceList("64", "263504348Ki", "110", "47227284Ki"),
			Allocatable: resourceList("63800m", "252018652Ki", "110", "43524605Ki"),
			NodeInfo: corev1.NodeSystemInfo{
				MachineID: fmt.Sprintf("%032x", i), SystemUUID: fmt.Sprintf("%08x-0000-0000-0000-000000000000", i), BootID: fmt.Sprintf("%08x-1111-1111-1111-111111111111", i),
				KernelVersion: "5.15.0-208.159.3.2.el8uek.x86_64", OSImage: "Oracle Linux Server 8.10", ContainerRuntimeVersion: "cri-o://1.31.1",
				KubeletVersion: "v1.31.1", KubeProxyVersion: "v1.31.1", OperatingSystem: "linux", Architecture: "amd64",
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

func resourceList(cpu, memory, pods, storage string) corev1.ResourceList {
	return corev1.ResourceList{
		corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(memory),
		corev1.ResourcePods: resource.MustParse(pods), corev1.ResourceEphemeralStorage: resource.MustParse(storage),
	}
}

// realisticService is a Service applied with kubectl (its last applied
// configuration annotation) and its EndpointSlices, each endpoint a pod on
// some node.
func realisticService(i int) (*corev1.Service, []*discoveryv1.EndpointSlice) {
	name := fmt.Sprintf("service-%04d", i)
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: "default", Name: name,
			Labels: map[string]string{"app.kubernetes.io/name": name, "app.kubernetes.io/part-of": "bench", "team": strconv.Itoa(i % 7)},
		},
		Spec: corev1.ServiceSpec{
			Selector: map[string]string{"app.kubernetes.io/name": name},
			Ports:    []corev1.ServicePort{{Name: "https", Port: 443, TargetPort: intstr.FromInt32(8443), Protocol: corev1.ProtocolTCP}},
		},
	}
	if i < memoryNodePortServices {
		svc.Spec.Type = corev1.ServiceTypeNodePort
		svc.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyLocal
	} else {
		svc.Spec.ClusterIP = corev1.ClusterIPNone
	}
	applied, _ := json.Marshal(svc)
	svc.Annotations = map[string]string{"kubectl.kubernetes.io/last-applied-configuration": string(applied)}

	var slices []*discoveryv1.EndpointSlice
	for s := range memorySlicesPerService {
		slice := &discoveryv1.EndpointSlice{
			ObjectMeta: metav1.ObjectMeta{
				Namespace: "default", Name: fmt.Sprintf("%s-%02d", name, s),
				Labels: map[string]string{
					discoveryv1.LabelServiceName: name, discoveryv1.LabelManagedBy: "endpointslice-controller.k8s.io",
					"app.kubernetes.io/name": name,
				},
				Annotations: map[string]string{"endpoints.kubernetes.io/last-change-trigger-time": "2026-01-01T00:00:00Z"},
			},
			AddressType: discoveryv1.AddressTypeIPv4,
			Ports:       []discoveryv1.EndpointPort{{Name: ptr.To("https"), Port: ptr.To[int32](8443), Protocol: ptr.To(corev1.ProtocolTCP)}},
		}
		for e := range memoryEndpointsPerSlice {
			k := (i*memorySlicesPerService+s)*memoryEndpointsPerSlice + e
			node := fmt.Sprintf("node-%04d", k%memoryNodes)
			pod := fmt.Sprintf("%s-%08x", name, k)
			slice.Endpoints = append(slice.Endpoints, discoveryv1.Endpoint{
				Addresses:  []string{fmt.Sprintf("10.%d.%d.%d", 100+k/65536, k/256%256, k%256)},
				Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true), Serving: ptr.To(true), Terminating: ptr.To(false)},
				NodeName:   ptr.To(node),
				Zone:       ptr.To("ap-tokyo-1-ad-" + strconv.Itoa(k%3+1)),
				TargetRef:  &corev1.ObjectReference{Kind: "Pod", Namespace: "default", Name: pod, UID: types.UID(fmt.Sprintf("00000000-0000-0000-0000-%012x", k))},
			})
		}
		slices = append(slices, slice)
	}
	return svc, slices
}
