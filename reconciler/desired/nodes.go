package desired

import (
	"cmp"
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/peppy-ratio/lbregistrar/api/v1beta1"
)

// Taints that say a node is leaving or gone. Its backends are drained and
// removed (Kubernetes' own service controller excludes only the first;
// the others say the same of the node, in the words of other tools).
const (
	// TaintToBeDeletedByClusterAutoscaler marks a node the cluster
	// autoscaler is removing (k8s.io/cloud-provider service controller).
	TaintToBeDeletedByClusterAutoscaler = "ToBeDeletedByClusterAutoscaler"
	// TaintKarpenterDisrupted marks a node Karpenter v1 is disrupting:
	// tainted before its replacement starts, lifted if that fails (Karpenter
	// docs, Disruption, "Control Flow").
	TaintKarpenterDisrupted = "karpenter.sh/disrupted"
	// TaintKarpenterDisruption with value "disrupting" is the same mark in
	// Karpenter v0.32 to v0.37 (v1beta1 API; design no-schedule-taint.md).
	TaintKarpenterDisruption = "karpenter.sh/disruption"
	// TaintNodeCloudShutdown marks a node whose instance the cloud reports
	// stopped (k8s.io/cloud-provider/api TaintNodeShutdown; Oracle's cloud
	// controller manager reports a STOPPED instance).
	TaintNodeCloudShutdown = "node.cloudprovider.kubernetes.io/shutdown"
)

// kubeletShuttingDown is what the kubelet puts in the Ready condition's
// message during a graceful node shutdown (KEP-2000; kubelet
// nodeshutdown manager's ShutdownStatus, joined into Ready=False by
// nodestatus.ReadyCondition).
const kubeletShuttingDown = "node is shutting down"

// node is an eligible node reduced to what registration needs: its
// Addresses, and its instance OCID, "" for none.
type node struct {
	name     string
	ipv4     string
	ipv6     string
	instance string
}

// address is the node's address for a backend set of family f, or "".
func (n node) address(f Family) string {
	if f == IPv6 {
		return n.ipv6
	}
	return n.ipv4
}

// eligibleNodes filters and addresses the nodes once for every target.
// explain (gated pods wait for their nodes) also says, in ns, why each
// node passed over is not registered.
func eligibleNodes(selector *metav1.LabelSelector, all []*corev1.Node, o Options, explain bool) (_ []node, ns nodeSet, _ []Issue) {
	var issues []Issue
	sel := labels.Everything()
	if selector != nil {
		s, err := metav1.LabelSelectorAsSelector(selector)
		if err != nil {
			return nil, ns, []Issue{{v1beta1.ReasonInvalidNodeSelector, fmt.Sprintf("spec.nodeSelector: %v", err)}}
		}
		sel = s
	}
	ns.selector = selector != nil
	candidates, ready := ns.candidates(sel, all, explain)
	filterReady := o.RequireReady
	if filterReady && ready == 0 && len(candidates) > 0 {
		filterReady = false
		issues = append(issues, Issue{v1beta1.ReasonNoReadyNodes, fmt.Sprintf("none of the %d eligible nodes is Ready; readiness is ignored until one is", len(candidates))})
	}
	out, noAddress := ns.addressed(candidates, filterReady, explain)
	if len(noAddress) > 0 {
		slices.Sort(noAddress)
		issues = append(issues, Issue{v1beta1.ReasonNodeWithoutAddress, fmt.Sprintf("nodes without an address (an InternalIP, or an IPv6 ExternalIP) are not registered: %s", Summarize(noAddress))})
	}
	return out, ns, issues
}

// candidates are the nodes of all sel selects that are eligible, and how
// many of them are Ready; with explain, ns says why each other was left.
func (ns *nodeSet) candidates(sel labels.Selector, all []*corev1.Node, explain bool) ([]*corev1.Node, int) {
	candidates := make([]*corev1.Node, 0, len(all))
	ready := 0
	for _, n := range all {
		if !sel.Matches(labels.Set(n.Labels)) {
			ns.skip(n, "is not selected by spec.nodeSelector", explain)
			continue
		}
		if why := Ineligible(n); why != "" {
			ns.skip(n, why, explain)
			continue
		}
		candidates = append(candidates, n)
		if IsReady(n) {
			ready++
		}
	}
	return candidates, ready
}

// addressed are the candidates registered (Ready ones only, with
// filterReady), by address, and the names of those without an address;
// with explain, ns records the registered ones and why each other was left.
func (ns *nodeSet) addressed(candidates []*corev1.Node, filterReady, explain bool) (out []node, noAddress []string) {
	out = make([]node, 0, len(candidates))
	for _, n := range candidates {
		if filterReady && !IsReady(n) {
			ns.skip(n, "is not Ready, and serve --require-ready-nodes registers Ready nodes only", explain)
			continue
		}
		v4, v6 := Addresses(n)
		if v4 == "" && v6 == "" {
			noAddress = append(noAddress, n.Name)
			ns.skip(n, "has no address (an InternalIP, or an IPv6 ExternalIP)", explain)
			continue
		}
		out = append(out, node{name: n.Name, ipv4: v4, ipv6: v6, instance: InstanceID(n)})
	}
	// Sorted by address, so each target's backends are usually in backend
	// order already.
	slices.SortStableFunc(out, func(a, b node) int {
		return cmp.Or(cmp.Compare(a.ipv4, b.ipv4), cmp.Compare(a.ipv6, b.ipv6))
	})
	if explain {
		ns.eligible = make(map[string]node, len(out))
		for _, n := range out {
			ns.eligible[n.name] = n
		}
	}
	return out, noAddress
}

// skip records, with explain, why n is not registered.
func (ns *nodeSet) skip(n *corev1.Node, why string, explain bool) {
	if !explain {
		return
	}
	if ns.skipped == nil {
		ns.skipped = map[string]string{}
	}
	ns.skipped[n.Name] = why
}

// Summarize names the first five of names, and counts the rest, so a
// message stays short however many there are.
func Summarize(names []string) string {
	const shown = 5
	if len(names) <= shown {
		return fmt.Sprint(names)
	}
	return fmt.Sprintf("%v and %d more", names[:shown], len(names)-shown)
}

// Eligible reports whether a node may back a load balancer at all: as the
// Kubernetes service controller decides it, and not leaving by a
// disruption taint or a graceful shutdown.
func Eligible(n *corev1.Node) bool { return Ineligible(n) == "" }

// Ineligible says why a node may not back a load balancer (Eligible), or
// "" when it may.
func Ineligible(n *corev1.Node) string {
	switch {
	case n.DeletionTimestamp != nil:
		return "is being deleted"
	case ShuttingDown(n):
		return "is shutting down"
	}
	// The exclusion label counts by its value, as Kubernetes' cloud
	// provider code reads it since kubernetes/kubernetes#131085: "false"
	// keeps the node; "true", an empty or an unparsable value excludes it.
	if v, labelled := n.Labels[corev1.LabelNodeExcludeBalancers]; labelled {
		if excluded, err := strconv.ParseBool(v); err != nil || excluded {
			return "is excluded from load balancers (label " + corev1.LabelNodeExcludeBalancers + ")"
		}
	}
	if i := slices.IndexFunc(n.Spec.Taints, departing); i >= 0 {
		return "is leaving (taint " + n.Spec.Taints[i].Key + ")"
	}
	return ""
}

func departing(t corev1.Taint) bool {
	switch t.Key {
	case TaintToBeDeletedByClusterAutoscaler, TaintKarpenterDisrupted, TaintNodeCloudShutdown,
		corev1.TaintNodeOutOfService: // non-graceful node shutdown, KEP-2268
		return true
	case TaintKarpenterDisruption:
		return t.Value == "disrupting"
	}
	return false
}

// ShuttingDown reports whether the kubelet says the node is shutting down.
// Once it has stopped, the node lifecycle controller replaces the message
// (Ready Unknown): the node is eligible again, as Kubernetes' service
// controller has it, until a taint says otherwise.
func ShuttingDown(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status != corev1.ConditionTrue && strings.Contains(c.Message, kubeletShuttingDown)
		}
	}
	return false
}

// IsReady reports whether the node's Ready condition is True.
func IsReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// Addresses are the addresses a node is registered by, in canonical form,
// "" where it has none:
//
//   - IPv4: its first IPv4 InternalIP, as the original operator took its
//     first InternalIP (models GetIPAddress; docs/migration.md N6). On OKE
//     the first is the primary VNIC's private address, which Oracle's cloud
//     controller manager lists first (instances.go extractNodeAddresses),
//     the only one outside its OpenShift secondary-VNIC case.
//   - IPv6: as Oracle's cloud controller manager picks it (util.go
//     NodeInternalIP, NodeExternalIp; load_balancer_spec.go getBackends):
//     its last IPv6 InternalIP, or, having none, its last IPv6 ExternalIP
//     ("Since Internal IP is optional for IPv6 populate external IP of
//     node if present"), which is how it reports the global unicast
//     address an OCI VNIC usually has (a private, ULA, one is an
//     InternalIP).
func Addresses(n *corev1.Node) (ipv4, ipv6 string) {
	var external6 string
	for _, a := range n.Status.Addresses {
		if a.Type != corev1.NodeInternalIP && a.Type != corev1.NodeExternalIP {
			continue
		}
		ip, err := netip.ParseAddr(a.Address)
		switch {
		case err != nil:
		case ip.Unmap().Is4():
			if ipv4 == "" && a.Type == corev1.NodeInternalIP {
				ipv4 = ip.Unmap().String()
			}
		case a.Type == corev1.NodeInternalIP:
			ipv6 = ip.WithZone("").String()
		default:
			external6 = ip.WithZone("").String()
		}
	}
	return ipv4, cmp.Or(ipv6, external6)
}

// NodeChanged reports whether an update to a node can change any desired
// state: its eligibility, labels (for nodeSelector), addresses, instance or
// readiness.
func NodeChanged(old, cur *corev1.Node) bool {
	return Eligible(old) != Eligible(cur) ||
		!labels.Equals(old.Labels, cur.Labels) ||
		!sameAddresses(old, cur) || InstanceID(old) != InstanceID(cur) ||
		IsReady(old) != IsReady(cur)
}

// InstanceID is the OCI instance OCID of a node, from its spec.providerID,
// which OKE and Oracle's cloud controller manager write as
// oci://ocid1.instance... or the bare OCID; "" when it names none.
func InstanceID(n *corev1.Node) string {
	id := strings.TrimPrefix(n.Spec.ProviderID, "oci://")
	if !strings.HasPrefix(id, "ocid1.instance.") {
		return ""
	}
	return id
}

func sameAddresses(a, b *corev1.Node) bool {
	a4, a6 := Addresses(a)
	b4, b6 := Addresses(b)
	return a4 == b4 && a6 == b6
}
