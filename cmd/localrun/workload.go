package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/peppy-ratio/lbregistrar/test/ociemu"
)

// node is a Kubernetes Node of the local run; its address is a loopback one,
// so the emulator's load balancers can forward real connections to it.
type node struct {
	name, ip string
	labels   map[string]string
}

var nodes = []node{
	{"node-a", "127.0.0.11", map[string]string{"node-role.kubernetes.io/ingress": ""}},
	{"node-b", "127.0.0.12", map[string]string{"node-role.kubernetes.io/ingress": ""}},
	// Excluded as Kubernetes' service controller excludes it: never registered.
	{"node-c", "127.0.0.13", map[string]string{corev1.LabelNodeExcludeBalancers: "true"}},
}

// Service ports of the sample Service and their NodePorts.
var servicePorts = []corev1.ServicePort{
	{Name: "https", Port: 443, TargetPort: intstr.FromInt32(8443), NodePort: 30443},
	{Name: "http2", Port: 80, TargetPort: intstr.FromInt32(8080), NodePort: 30080},
}

// pod is a Pod of the pod-target sample's Service shop/web, with a
// VCN-native address, on a node. It answers at a loopback stand-in, which
// the emulator connects to in its place: Kubernetes keeps EndpointSlice
// addresses off loopback.
type pod struct{ name, ip, standIn, node string }

var webPods = []pod{{"web-1", "10.1.0.21", "127.0.1.21", "node-a"}, {"web-2", "10.1.0.22", "127.0.1.22", "node-b"}}

// podStandIns are the emulator's stand-ins for the web pods.
func podStandIns() map[string]string {
	m := map[string]string{}
	for _, p := range webPods {
		m[p.ip] = p.standIn
	}
	return m
}

// webPort is the pod-target sample Service's port, to the pods' 8080.
var webPort = corev1.ServicePort{Name: "http", Port: 80, TargetPort: intstr.FromInt32(8080)}

// createWorkload creates what a cluster would have: Nodes with addresses,
// the Services the samples name, and the EndpointSlices their controller
// would write (nothing here runs Pods).
func createWorkload(ctx context.Context, c client.Client) error {
	for _, n := range nodes {
		obj := &corev1.Node{
			ObjectMeta: metav1.ObjectMeta{Name: n.name, Labels: n.labels},
			// As OKE writes it: a source-preserving NLB backend set takes nodes by instance.
			Spec: corev1.NodeSpec{ProviderID: "oci://ocid1.instance.oc1.ap-tokyo-1." + n.name},
		}
		if err := c.Create(ctx, obj); err != nil {
			return err
		}
		obj.Status = corev1.NodeStatus{
			Addresses:  []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: n.ip}, {Type: corev1.NodeHostName, Address: n.name}},
			Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}},
		}
		if err := c.Status().Update(ctx, obj); err != nil {
			return err
		}
	}
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "istio-system"}}); err != nil {
		return err
	}
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "istio-system", Name: "istio-ingressgateway"},
		Spec: corev1.ServiceSpec{
			Type:     corev1.ServiceTypeNodePort,
			Selector: map[string]string{"app": "istio-ingressgateway"},
			Ports:    servicePorts,
		},
	}
	if err := c.Create(ctx, svc); err != nil {
		return err
	}
	slice := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: "istio-system", Name: "istio-ingressgateway-local",
			Labels: map[string]string{discoveryv1.LabelServiceName: "istio-ingressgateway"},
		},
		AddressType: discoveryv1.AddressTypeIPv4,
	}
	for i, n := range nodes[:2] { // gateway Pods run on the two ingress nodes
		slice.Endpoints = append(slice.Endpoints, discoveryv1.Endpoint{
			Addresses:  []string{"10.244." + strconv.Itoa(i) + ".10"},
			Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true), Serving: ptr.To(true)},
			NodeName:   ptr.To(n.name),
		})
	}
	for _, p := range servicePorts {
		slice.Ports = append(slice.Ports, discoveryv1.EndpointPort{Name: ptr.To(p.Name), Port: ptr.To(p.TargetPort.IntVal), Protocol: ptr.To(corev1.ProtocolTCP)})
	}
	if err := c.Create(ctx, slice); err != nil {
		return err
	}
	return createWebPods(ctx, c)
}

// createWebPods creates the pod-target sample's ClusterIP Service and the
// EndpointSlice of its pods.
func createWebPods(ctx context.Context, c client.Client) error {
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "shop"}}); err != nil {
		return err
	}
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web"},
		Spec:       corev1.ServiceSpec{Selector: map[string]string{"app": "web"}, Ports: []corev1.ServicePort{webPort}},
	}
	if err := c.Create(ctx, svc); err != nil {
		return err
	}
	slice := &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Namespace: "shop", Name: "web-pods", Labels: map[string]string{discoveryv1.LabelServiceName: "web"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: ptr.To(webPort.Name), Port: ptr.To(webPort.TargetPort.IntVal), Protocol: ptr.To(corev1.ProtocolTCP)}},
	}
	for _, p := range webPods {
		slice.Endpoints = append(slice.Endpoints, discoveryv1.Endpoint{
			Addresses:  []string{p.ip},
			Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true), Serving: ptr.To(true)},
			NodeName:   ptr.To(p.node),
			TargetRef:  &corev1.ObjectReference{Kind: "Pod", Namespace: "shop", Name: p.name},
		})
	}
	return c.Create(ctx, slice)
}

// serveNodes answers on every node address and NodePort, as kube-proxy and
// the gateway would, and on every web pod's address and port, so a
// connection through a load balancer shows where it arrived, and the
// emulator's health checks find them up.
func serveNodes() (stop func(), err error) {
	var servers []*http.Server
	stop = func() {
		for _, s := range servers {
			s.Close()
		}
	}
	serve := func(name, addr string) error {
		l, err := net.Listen("tcp", addr)
		if err != nil {
			return err
		}
		s := &http.Server{ReadHeaderTimeout: 5 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			fmt.Fprintf(w, "served by %s at %s\n", name, addr)
		})}
		servers = append(servers, s)
		go func() { _ = s.Serve(l) }() // ends with the listener
		return nil
	}
	for _, n := range nodes {
		// The fixed-port sample registers 30443 too, the https NodePort.
		for _, p := range servicePorts {
			if err := serve(n.name, net.JoinHostPort(n.ip, strconv.Itoa(int(p.NodePort)))); err != nil {
				stop()
				return nil, err
			}
		}
	}
	for _, p := range webPods {
		if err := serve("pod "+p.name, net.JoinHostPort(p.standIn, strconv.Itoa(int(webPort.TargetPort.IntVal)))); err != nil {
			stop()
			return nil, err
		}
	}
	return stop, nil
}

// sendThroughLoadBalancer opens the emulated network load balancer's
// listener for the "ingress" backend set and sends one request through it.
func sendThroughLoadBalancer(emu *ociemu.Emulator, lb string) string {
	addr, err := emu.Forward(lb, "ingress")
	if err != nil {
		return "forwarding failed: " + err.Error()
	}
	client := http.Client{Timeout: 5 * time.Second}
	resp, err := client.Get("http://" + addr + "/")
	if err != nil {
		return fmt.Sprintf("GET http://%s/ failed: %v", addr, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return fmt.Sprintf("GET http://%s/ -> %s", addr, strings.TrimSpace(string(body)))
}
