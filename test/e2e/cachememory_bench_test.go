package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"testing"

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

	"github.com/peppy-ratio/lbregistrar/api/v1beta1"
	"github.com/peppy-ratio/lbregistrar/reconciler"
	"github.com/peppy-ratio/lbregistrar/test/kube"
	"github.com/peppy-ratio/lbregistrar/test/scale"
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
	// memoryPods are pods as a ReplicaSet creates them, every other one
	// given lbregistrar's readiness gate (and its label) by the webhook.
	memoryPods = 10000
	// memoryTenantPods are pods a tenant creates in a namespace that did
	// not opt into readiness gates, each with tenantLabels labels of the
	// largest size a label may have (a 253-character prefix, a
	// 63-character name and value), and no gate or label of lbregistrar's,
	// which the admission policy keeps out of such namespaces.
	memoryTenantPods = 10000
	tenantLabels     = 32
)

var (
	memoryClusterOnce sync.Once
	memoryCluster     *kube.Cluster // stopped by TestMain
	memoryClusterErr  error
)

// BenchmarkCacheMemory starts a controller-runtime cache with the informers
// the controller watches (nodes, Services, EndpointSlices, pods) against
// an API server with 5,000 nodes, 10,000 EndpointSlices of 1,000
// Services and 10,000 pods, half of them with the readiness gate, and
// 10,000 pods of a tenant's namespace with the largest labels, waits
// for it to sync, collects garbage and reports the heap it uses
// (heap-MiB), the pods it has (pods-cached) and the test process's
// resident memory (rss-MiB, the whole process, after returning free memory
// to the system). The baseline caches whole objects; trimmed is the
// controller's cache (reconciler.CacheOptions: only the gated pods), with
// heap-x-baseline its share of the baseline's heap. ns/op is the time to
// start and sync.
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
	for _, obj := range []client.Object{&corev1.Node{}, &corev1.Service{}, &discoveryv1.EndpointSlice{}, &corev1.Pod{}} {
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
	if rss, ok := scale.ResidentMiB(0); ok {
		b.ReportMetric(rss, "rss-MiB")
	}
	var nodes corev1.NodeList
	if err := c.List(ctx, &nodes); err != nil || len(nodes.Items) != memoryNodes {
		b.Fatalf("the cache has %d nodes (%v), want %d", len(nodes.Items), err, memoryNodes)
	}
	var pods corev1.PodList
	if err := c.List(ctx, &pods); err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(len(pods.Items)), "pods-cached")
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

// populatedCluster is an API server of its own with the objects, filled
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

// fill creates the nodes, Services, EndpointSlices and pods as the
// components that write them do (scale.Create).
func fill(ctx context.Context, cfg *rest.Config) error {
	objects := scale.Nodes(memoryNodes)
	for i := range memoryServices {
		svc, slices := realisticService(i)
		objects = append(objects, svc)
		for _, s := range slices {
			objects = append(objects, s)
		}
	}
	for i := range memoryPods {
		objects = append(objects, realisticPod(i))
	}
	for i := range memoryTenantPods {
		objects = append(objects, tenantPod(i))
	}
	c, err := client.New(cfg, client.Options{Scheme: kube.NewScheme()})
	if err != nil {
		return err
	}
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "tenant"}}); err != nil {
		return err
	}
	if err := scale.Create(ctx, cfg, objects); err != nil {
		return err
	}
	// Node status is kept on create, as kubelets register; make sure.
	var node corev1.Node
	if err := c.Get(ctx, client.ObjectKey{Name: scale.NodeName(0)}, &node); err != nil {
		return err
	}
	if len(node.Status.Images) == 0 || len(node.ManagedFields) == 0 {
		return fmt.Errorf("%s was stored without its status or managed fields: %d images, %d managed fields", node.Name, len(node.Status.Images), len(node.ManagedFields))
	}
	return nil
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
			node := scale.NodeName(k % memoryNodes)
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

// tenantPod is pod i of a tenant's namespace that did not opt into
// readiness gates, carrying the largest labels it may.
func tenantPod(i int) *corev1.Pod {
	p := realisticPod(i)
	p.Namespace, p.Name = "tenant", fmt.Sprintf("tenant-%05d", i)
	delete(p.Labels, v1beta1.ReadinessGateLabel)
	p.Spec.ReadinessGates = nil
	prefix := strings.Repeat("p", 63) + "." + strings.Repeat("q", 63) + "." + strings.Repeat("r", 63) + "." + strings.Repeat("s", 61)
	for j := range tenantLabels {
		name := fmt.Sprintf("%s%02d", strings.Repeat("n", 61), j)
		p.Labels[prefix+"/"+name] = strings.Repeat("v", 63)
	}
	return p
}

// realisticPod is pod i of a Deployment's ReplicaSet of Service
// service-NNNN, as the ReplicaSet controller creates it, every other one
// with lbregistrar's readiness gate and label. (The API server drops the
// status a pod is created with; a kubelet's would add to the baseline.)
func realisticPod(i int) *corev1.Pod {
	service := fmt.Sprintf("service-%04d", i%memoryServices)
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: "default", Name: fmt.Sprintf("%s-7d4f9c6b8-%05d", service, i),
			Labels: map[string]string{"app.kubernetes.io/name": service, "pod-template-hash": "7d4f9c6b8"},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: service + "-7d4f9c6b8",
				UID: types.UID(fmt.Sprintf("10000000-0000-0000-0000-%012x", i%memoryServices)), Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}},
		},
		Spec: corev1.PodSpec{
			NodeName: scale.NodeName(i % memoryNodes), ServiceAccountName: "default",
			Containers: []corev1.Container{{
				Name: "app", Image: "registry.example/app:v1.2.3",
				Ports:          []corev1.ContainerPort{{Name: "https", ContainerPort: 8443, Protocol: corev1.ProtocolTCP}},
				Env:            []corev1.EnvVar{{Name: "LOG_LEVEL", Value: "info"}, {Name: "POD_NAME", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}}},
				Resources:      corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("128Mi")}},
				ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/healthz", Port: intstr.FromString("https"), Scheme: corev1.URISchemeHTTPS}}},
				VolumeMounts:   []corev1.VolumeMount{{Name: "kube-api-access", MountPath: "/var/run/secrets/kubernetes.io/serviceaccount", ReadOnly: true}},
			}},
			Volumes: []corev1.Volume{{Name: "kube-api-access", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{
				{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{Path: "token", ExpirationSeconds: ptr.To[int64](3607)}},
				{ConfigMap: &corev1.ConfigMapProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "kube-root-ca.crt"}, Items: []corev1.KeyToPath{{Key: "ca.crt", Path: "ca.crt"}}}},
			}}}}},
			Tolerations: []corev1.Toleration{
				{Key: "node.kubernetes.io/not-ready", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: ptr.To[int64](300)},
				{Key: "node.kubernetes.io/unreachable", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: ptr.To[int64](300)},
			},
		},
	}
	if i%2 == 0 {
		p.Labels[v1beta1.ReadinessGateLabel] = ""
		p.Spec.ReadinessGates = []corev1.PodReadinessGate{{ConditionType: v1beta1.ReadinessGate}}
	}
	return p
}
