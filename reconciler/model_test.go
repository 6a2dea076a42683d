package reconciler_test

import (
	"context"
	"flag"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/oracle/oci-go-sdk/v65/common"
	"github.com/oracle/oci-go-sdk/v65/loadbalancer"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"pgregory.net/rapid"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/peppy-ratio/lbregistrar/api/v1alpha1"
	"github.com/peppy-ratio/lbregistrar/api/v1beta1"
	"github.com/peppy-ratio/lbregistrar/api/validation"
	"github.com/peppy-ratio/lbregistrar/reconciler"
	"github.com/peppy-ratio/lbregistrar/reconciler/desired"
	"github.com/peppy-ratio/lbregistrar/test/eventually"
	"github.com/peppy-ratio/lbregistrar/test/ociemu"
)

// modelChecks is how many sequences TestOwnershipModel runs unless
// -rapid.checks says otherwise (then each world runs that many); make soak
// runs thousands.
const modelChecks = 200

// modelWorlds is how many worlds TestOwnershipModel runs side by side, each
// on an API server and emulator of its own (nodes and LBRegistrars are
// cluster-scoped), sharing its sequences out: a sequence mostly waits for
// the cluster to settle, so two worlds take about the time of one.
const modelWorlds = 2

// TestOwnershipModel drives the controller, against the real API server
// and the emulator, through random sequences of what happens to it in a
// cluster: nodes joining, leaving (drained for the node drain period
// first) and marked departing then coming back, resources created, deleted, moved to
// another port, pointed at another backend set of their load balancer or
// at another load balancer (the old one drained for the drain periods
// first) and handed over (replaces, as lbregistrar migrate writes them), backends added by hand, ownership records forged by another
// status writer, another writer draining a wanted backend (put back by the
// watch of other writers' changes, the resync being an hour away), v1alpha1
// phase writes, controller restarts (the leader changing), drain periods
// running out, OCI faults, and pods gated by readiness gates (created,
// deleted, created again under their name and address, their health
// flapping, their resource suspended or in a Conflict: model_gates_test.go).
// After every step it
// waits for the cluster to settle and checks what the controller promises:
//
//   - a backend it did not register (added by hand or seeded) is never
//     removed or changed;
//   - every backend a live resource wants is registered and serving once
//     the resource says Ready=True;
//   - a deleted resource's backends are gone once its finalizer is
//     released, unless a live resource wants them (or the record they were
//     in was forged, when they may be left behind);
//   - records name only backends that exist and are not foreign;
//   - a readiness gate opens only for a pod the load balancer has found
//     healthy, for every such pod while its resource can write, and holds
//     while it cannot (gatesSettled).
//
// A failing sequence is printed shrunk, with its world and the seed that
// replays it (go test ./reconciler -run TestOwnershipModel/world-1
// -rapid.seed=N), and saved under testdata/rapid for -rapid.failfile.
func TestOwnershipModel(t *testing.T) {
	skipWithoutAPIServer(t)
	setUnlessGiven(t, "rapid.checks", strconv.Itoa(modelChecks/modelWorlds))
	setUnlessGiven(t, "rapid.steps", "12")
	for world := range modelWorlds {
		t.Run(fmt.Sprintf("world-%d", world), func(t *testing.T) {
			t.Parallel()
			w := newModelWorld(t, world)
			rapid.Check(t, func(rt *rapid.T) {
				m := w.begin(rt)
				rt.Repeat(map[string]func(*rapid.T){
					"addNode":            m.addNode,
					"removeNode":         m.removeNode,
					"departNode":         m.departNode,
					"returnNode":         m.returnNode,
					"drainByOther":       m.drainByOther,
					"create":             m.create,
					"delete":             m.delete,
					"replace":            m.replace,
					"changePort":         m.changePort,
					"retarget":           m.retarget,
					"addForeign":         m.addForeign,
					"forgeRecord":        m.forgeRecord,
					"writePhase":         m.writePhase,
					"restart":            m.restart,
					"waitDrain":          m.waitDrain,
					"faultOnce":          m.faultOnce,
					"deleteAfterForgery": m.deleteAfterForgery,
					"podCreate":          m.podCreate,
					"podDelete":          m.podDelete,
					"podRecreate":        m.podRecreate,
					"podFlap":            m.podFlap,
					"podSuspend":         m.podSuspend,
					"podConflict":        m.podConflict,
					"":                   m.check,
				})
			})
		})
	}
}

// setUnlessGiven sets the flag name to value unless the command line did.
func setUnlessGiven(t *testing.T, name, value string) {
	t.Helper()
	if f := flag.Lookup(name); f != nil && !isFlagSet(name) {
		if err := f.Value.Set(value); err != nil {
			t.Fatal(err)
		}
	}
}

func isFlagSet(name string) bool {
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}

// modelSets are the backend sets sequences register in: two of the
// classic load balancer (empty in the seed) and the NLB's, which holds
// foreign backends from the start.
var modelSets = []modelSet{{classicLB, "api"}, {classicLB, "admin"}, {networkLB, "tcp"}}

var modelPorts = []int32{31001, 31002}

const modelDrain = 400 * time.Millisecond

type modelSet struct{ lb, name string }

func (s modelSet) String() string { return s.name }

// modelWorld is what sequences share: one emulator and namespace, reset
// between sequences, and the controller's options.
type modelWorld struct {
	f         *fixture
	listeners *podListeners // the gated pods' stand-ins
	opts      reconciler.Options
	lb        loadbalancer.LoadBalancerClient // a foreign writer's client
	run       int
	stop      func()
}

// newModelWorld starts world number world: the first on the package's API
// server, the others on one of their own.
func newModelWorld(t *testing.T, world int) *modelWorld {
	listeners := newPodListeners(world)
	emuOpts := ociemu.Options{StandIns: listeners.standIns}
	var f *fixture
	if world == 0 {
		f = newFixture(t, emuOpts)
	} else {
		cluster, err := startPlainCluster(true)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cluster.Stop() })
		api, err := client.New(cluster.Config, client.Options{Scheme: scheme})
		if err != nil {
			t.Fatal(err)
		}
		f = newFixtureOn(t, emuOpts, cluster.Config, api)
	}
	t.Cleanup(listeners.closeAll)
	// The fixture's context bounds a test of a few cases; this one runs
	// for as long as its sequences take.
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	f.ctx = ctx
	o := f.options()
	o.DrainPeriod, o.NodeDrainPeriod = modelDrain, modelDrain
	o.Resync = time.Hour // nothing but events, wake-ups and the watch drives a reconcile
	o.WatchPeriod = 100 * time.Millisecond
	config, err := f.emu.NewUser()
	f.must(err)
	lb, err := loadbalancer.NewLoadBalancerClientWithConfigurationProvider(config)
	f.must(err)
	lb.Host = f.emu.URL()
	return &modelWorld{f: f, listeners: listeners, opts: o, lb: lb}
}

// begin resets the world (no resource, no node, the seeded load
// balancers, no fault) and starts a controller, for one sequence.
func (w *modelWorld) begin(rt *rapid.T) *model {
	f := w.f
	if w.stop != nil {
		w.stop()
	}
	ctx := f.ctx
	var list v1beta1.LBRegistrarList
	f.must(f.api.List(ctx, &list))
	for i := range list.Items {
		o := &list.Items[i]
		if !strings.HasPrefix(o.Name, "model-") {
			continue
		}
		if len(o.Finalizers) > 0 {
			o.Finalizers = nil
			if err := f.api.Update(ctx, o); err != nil && !apierrors.IsNotFound(err) {
				f.t.Fatal(err)
			}
		}
		if err := f.api.Delete(ctx, o); err != nil && !apierrors.IsNotFound(err) {
			f.t.Fatal(err)
		}
	}
	f.must(f.api.DeleteAllOf(ctx, &corev1.Node{}))
	f.eventually(30*time.Second, func() error {
		var nodes corev1.NodeList
		f.must(f.api.List(ctx, &nodes))
		f.must(f.api.List(ctx, &list))
		left := slices.DeleteFunc(list.Items, func(o v1beta1.LBRegistrar) bool { return !strings.HasPrefix(o.Name, "model-") })
		if len(left)+len(nodes.Items) > 0 {
			var who []string
			for _, o := range left {
				who = append(who, fmt.Sprintf("%s (created %s, deleted %v, finalizers %v, written by %s)", o.Name,
					o.CreationTimestamp.Format(time.StampMilli), o.DeletionTimestamp, o.Finalizers, writers(o.ManagedFields)))
			}
			return fmt.Errorf("%d resources and %d nodes left from the last sequence: %s", len(left), len(nodes.Items), strings.Join(who, "; "))
		}
		return nil
	})
	seed, err := ociemu.LoadSeedFile("testdata/seed.yaml")
	f.must(err)
	f.must(f.emu.SeedState(seed))
	f.emu.ClearFaults()
	w.run++
	m := &model{w: w, rt: rt, prefix: fmt.Sprintf("model-%d", w.run), nodes: map[string]string{}, departing: map[string]string{}, resources: map[string]*modelResource{},
		foreign: map[string]string{}, leakable: map[string]bool{}}
	for _, s := range modelSets {
		for _, b := range f.backends(s.lb, s.name) {
			m.foreign[s.name+"/"+backendKey(b)] = b
		}
	}
	m.beginPods()
	_, w.stop = f.startManager(w.opts)
	m.joinNode() // a cluster has a node; with none, every backend set is held
	return m
}

// writers are who wrote an object, as its managed fields tell, and when.
func writers(fields []metav1.ManagedFieldsEntry) string {
	var out []string
	for _, f := range fields {
		out = append(out, fmt.Sprintf("%s %s %s at %s", f.Manager, f.Operation, f.Subresource, f.Time.Format(time.RFC3339)))
	}
	return strings.Join(out, ", ")
}

// model is what one sequence expects of the world.
type model struct {
	w      *modelWorld
	rt     *rapid.T
	prefix string
	seq    int
	// nodes are the live nodes, name -> address.
	nodes map[string]string
	// departing are the nodes marked as leaving (by the cluster
	// autoscaler's taint), name -> address: present, but wanted by nobody.
	departing map[string]string
	// resources are the resources created and not gone yet.
	resources map[string]*modelResource
	// foreign are the backends someone else registered, set/ip:port ->
	// the backend as backends() prints it.
	foreign map[string]string
	// leakable are the set/ip:port backends that may stay registered
	// though nothing wants them: those of a resource deleted right after
	// its record was forged.
	leakable map[string]bool
	// gated are the pods readiness gates hold, and their resource.
	gated *modelPods
}

type modelResource struct {
	name     string
	set      modelSet
	port     int32
	replaces string
	deleting bool
}

func (m *model) next() int { m.seq++; return m.seq }

func (m *model) joinNode() {
	n := m.next()
	name := fmt.Sprintf("%s-n%d", m.prefix, n)
	ip := fmt.Sprintf("10.0.%d.%d", 100+m.w.run%100, n)
	m.w.f.node(name, ip)
	m.nodes[name] = ip
}

func (m *model) addNode(rt *rapid.T) {
	if len(m.nodes) >= 4 {
		rt.Skip("enough nodes")
	}
	m.joinNode()
}

func (m *model) removeNode(rt *rapid.T) {
	if len(m.nodes) < 2 {
		rt.Skip("the last node stays")
	}
	name := rapid.SampledFrom(slices.Sorted(maps.Keys(m.nodes))).Draw(rt, "node")
	m.w.f.must(m.w.f.api.Delete(m.w.f.ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}))
	delete(m.nodes, name)
}

// departNode marks a node as leaving, as the cluster autoscaler does
// before it deletes it: its backends are drained, then removed.
func (m *model) departNode(rt *rapid.T) {
	if len(m.nodes) < 2 {
		rt.Skip("the last node stays")
	}
	name := rapid.SampledFrom(slices.Sorted(maps.Keys(m.nodes))).Draw(rt, "node")
	m.w.f.updateNode(name, func(n *corev1.Node) {
		n.Spec.Taints = append(n.Spec.Taints, corev1.Taint{Key: desired.TaintToBeDeletedByClusterAutoscaler, Effect: corev1.TaintEffectNoSchedule})
	})
	m.departing[name] = m.nodes[name]
	delete(m.nodes, name)
}

// returnNode takes the leaving mark off a node (the scale-down was
// called off): it serves again.
func (m *model) returnNode(rt *rapid.T) {
	if len(m.departing) == 0 {
		rt.Skip("no node is leaving")
	}
	name := rapid.SampledFrom(slices.Sorted(maps.Keys(m.departing))).Draw(rt, "node")
	m.w.f.updateNode(name, func(n *corev1.Node) { n.Spec.Taints = nil })
	m.nodes[name] = m.departing[name]
	delete(m.departing, name)
}

// drainByOther drains, through OCI's own API as another cluster or the
// console would, a backend a resource wants in a classic backend set.
func (m *model) drainByOther(rt *rapid.T) {
	var wanted []string
	for _, s := range modelSets[:2] {
		if h := m.holder(s); h != nil {
			for _, ip := range slices.Sorted(maps.Values(m.nodes)) {
				wanted = append(wanted, s.name+"/"+plainKey(ip, h.port))
			}
		}
	}
	if len(wanted) == 0 {
		rt.Skip("no backend is wanted")
	}
	set, backend, _ := strings.Cut(rapid.SampledFrom(wanted).Draw(rt, "backend"), "/")
	f := m.w.f
	eventually.Passes(rt, 20*time.Second, 20*time.Millisecond, func() error {
		_, err := m.w.lb.UpdateBackend(f.ctx, loadbalancer.UpdateBackendRequest{LoadBalancerId: common.String(classicLB), BackendSetName: common.String(set),
			BackendName: common.String(backend), UpdateBackendDetails: loadbalancer.UpdateBackendDetails{
				Weight: common.Int(1), Backup: common.Bool(false), Drain: common.Bool(true), Offline: common.Bool(false)}})
		return err // a 409 while the controller writes: again
	})
}

// claimants are the resources claiming set, deleting ones included.
func (m *model) claimants(set modelSet) []*modelResource {
	var out []*modelResource
	for _, r := range m.resources {
		if r.set == set {
			out = append(out, r)
		}
	}
	return out
}

// holder is the live resource that keeps set: the one no other live
// claimant replaces.
func (m *model) holder(set modelSet) *modelResource {
	var live []*modelResource
	for _, r := range m.claimants(set) {
		if !r.deleting {
			live = append(live, r)
		}
	}
	for _, r := range live {
		if !slices.ContainsFunc(live, func(o *modelResource) bool { return o.replaces == r.name }) {
			return r
		}
	}
	return nil
}

func (m *model) create(rt *rapid.T) {
	free := slices.DeleteFunc(slices.Clone(modelSets), func(s modelSet) bool { return len(m.claimants(s)) > 0 })
	if len(free) == 0 {
		rt.Skip("every backend set is claimed")
	}
	set := rapid.SampledFrom(free).Draw(rt, "set")
	m.createResource(set, rapid.SampledFrom(modelPorts).Draw(rt, "port"), "")
}

func (m *model) createResource(set modelSet, port int32, replaces string) {
	name := fmt.Sprintf("%s-r%d", m.prefix, m.next())
	obj := &v1beta1.LBRegistrar{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       v1beta1.LBRegistrarSpec{LoadBalancerID: set.lb, APIKey: m.w.f.key.DeepCopy(), Services: []v1beta1.Target{fixedPort(set.name, port)}},
	}
	if replaces != "" {
		obj.Annotations = map[string]string{validation.ReplacesAnnotation: replaces}
	}
	m.w.f.must(m.w.f.api.Create(m.w.f.ctx, obj))
	m.resources[name] = &modelResource{name: name, set: set, port: port, replaces: replaces}
}

// live are the live resources, by name.
func (m *model) live() []*modelResource {
	var out []*modelResource
	for _, name := range slices.Sorted(maps.Keys(m.resources)) {
		if r := m.resources[name]; !r.deleting {
			out = append(out, r)
		}
	}
	return out
}

func (m *model) pick(rt *rapid.T) *modelResource {
	live := m.live()
	if len(live) == 0 {
		rt.Skip("no live resource")
	}
	return rapid.SampledFrom(live).Draw(rt, "resource")
}

func (m *model) delete(rt *rapid.T) {
	r := m.pick(rt)
	m.w.f.must(m.w.f.api.Delete(m.w.f.ctx, m.obj(r.name)))
	r.deleting = true
}

// replace hands a resource over to a new one, as lbregistrar migrate does
// (replaces), and deletes the old one at once or leaves that to a later
// step; the new one may use another port.
func (m *model) replace(rt *rapid.T) {
	var alone []*modelResource
	for _, r := range m.live() {
		if len(m.claimants(r.set)) == 1 {
			alone = append(alone, r)
		}
	}
	if len(alone) == 0 {
		rt.Skip("no resource to hand over")
	}
	old := rapid.SampledFrom(alone).Draw(rt, "replaced")
	m.createResource(old.set, rapid.SampledFrom(modelPorts).Draw(rt, "port"), old.name)
	if rapid.Bool().Draw(rt, "deleteReplaced") {
		m.w.f.must(m.w.f.api.Delete(m.w.f.ctx, m.obj(old.name)))
		old.deleting = true
	}
}

// changePort moves a resource that holds its backend set to another port.
func (m *model) changePort(rt *rapid.T) {
	r := m.pick(rt)
	if m.holder(r.set) != r {
		rt.Skip("a resource that does not hold its backend set writes nothing there")
	}
	port := rapid.SampledFrom(modelPorts).Draw(rt, "port")
	m.w.f.updateRegistrar(m.obj(r.name), func(o *v1beta1.LBRegistrar) { o.Spec.Services[0].NodePort = port })
	r.port = port
}

// retarget points a resource that alone claims its backend set at a free
// one: of the same load balancer (its target's backendSetName changed; the
// old set drains for the node drain period) or of the other (its
// loadBalancerId changed; the old load balancer drains for the drain
// period, then the new one is registered). Once the drain is over, the old
// set has nothing of it registered.
func (m *model) retarget(rt *rapid.T) {
	r := m.pick(rt)
	if len(m.claimants(r.set)) > 1 {
		rt.Skip("a resource that shares its claim stays where it is")
	}
	free := slices.DeleteFunc(slices.Clone(modelSets), func(s modelSet) bool { return len(m.claimants(s)) > 0 })
	if len(free) == 0 {
		rt.Skip("no backend set is free")
	}
	to := rapid.SampledFrom(free).Draw(rt, "to")
	m.w.f.updateRegistrar(m.obj(r.name), func(o *v1beta1.LBRegistrar) {
		o.Spec.LoadBalancerID, o.Spec.Services[0].BackendSetName = to.lb, to.name
	})
	r.set = to
}

// addForeign registers a backend by hand through OCI's own API, as an
// operator in the console would: an address no node has, or a node's
// address at a port lbregistrar does not use.
func (m *model) addForeign(rt *rapid.T) {
	set := rapid.SampledFrom(modelSets[:2]).Draw(rt, "set")
	ip := fmt.Sprintf("192.168.77.%d", m.next())
	if len(m.nodes) > 0 && rapid.Bool().Draw(rt, "atANode") {
		ip = m.nodes[rapid.SampledFrom(slices.Sorted(maps.Keys(m.nodes))).Draw(rt, "node")]
	}
	const port, weight = 32000, 3
	b := fmt.Sprintf("%s:%d/%d", ip, port, weight)
	if m.foreign[set.name+"/"+backendKey(b)] != "" {
		rt.Skip("registered by hand already")
	}
	f := m.w.f
	eventually.Passes(rt, 20*time.Second, 20*time.Millisecond, func() error {
		_, err := m.w.lb.CreateBackend(f.ctx, loadbalancer.CreateBackendRequest{LoadBalancerId: common.String(set.lb), BackendSetName: common.String(set.name),
			CreateBackendDetails: loadbalancer.CreateBackendDetails{IpAddress: common.String(ip), Port: common.Int(port), Weight: common.Int(weight)}})
		if err != nil && !strings.Contains(err.Error(), "already exists") {
			return err
		}
		if !slices.Contains(f.backends(set.lb, set.name), b) {
			return fmt.Errorf("%s not registered yet", b)
		}
		return nil
	})
	m.foreign[set.name+"/"+backendKey(b)] = b
}

// forgeRecord writes, as another identity with access to the status
// subresource and no webhook in front (a restore, or a writer past
// admission), a record claiming a foreign backend; the resource is then
// reconciled, as it would be at its next event or resync.
func (m *model) forgeRecord(rt *rapid.T) {
	r := m.pick(rt)
	m.forge(rt, r)
	m.w.f.updateRegistrar(m.obj(r.name), func(o *v1beta1.LBRegistrar) {
		o.Annotations = map[string]string{"model/touched": strconv.Itoa(m.next())}
		if r.replaces != "" {
			o.Annotations[validation.ReplacesAnnotation] = r.replaces
		}
	})
}

// forge adds a foreign backend to r's record. The controller then ignores
// the whole record, so what it listed may be left behind: a resource that
// holds its backend set adopts what it still wants, but one that lost its
// claim, or is deleted before it reconciles, forgets the rest.
func (m *model) forge(rt *rapid.T, r *modelResource) {
	var before v1beta1.LBRegistrar
	m.w.f.must(m.w.f.api.Get(m.w.f.ctx, client.ObjectKey{Name: r.name}, &before))
	for _, rec := range before.Status.BackendSets {
		for _, b := range rec.Owned() {
			m.leakable[rec.Name+"/"+plainKey(b.IP, b.Port)] = true
		}
	}
	keys := slices.Sorted(maps.Keys(m.foreign))
	victim := rapid.SampledFrom(keys).Draw(rt, "victim")
	set, backend, _ := strings.Cut(victim, "/")
	ip, port := splitBackend(backend)
	m.w.f.writeStatus(m.obj(r.name), func(o *v1beta1.LBRegistrar) {
		if rapid.Bool().Draw(rt, "elsewhere") { // a record of another load balancer
			for _, s := range modelSets {
				if s.name == set {
					o.Status.LoadBalancerID = s.lb
				}
			}
		}
		i := slices.IndexFunc(o.Status.BackendSets, func(bs v1beta1.BackendSetStatus) bool { return bs.Name == set })
		if i < 0 {
			o.Status.BackendSets = append(o.Status.BackendSets, v1beta1.BackendSetStatus{Name: set})
			i = len(o.Status.BackendSets) - 1
		}
		o.Status.BackendSets[i].Backends = append(o.Status.BackendSets[i].Backends, v1beta1.BackendGroup{Port: port, Weight: 1, Addresses: ip})
	})
}

// deleteAfterForgery forges a resource's record, then deletes it before
// anything reconciles it: its own backends may be left behind, never a
// foreign one removed.
func (m *model) deleteAfterForgery(rt *rapid.T) {
	r := m.pick(rt)
	m.forge(rt, r)
	m.w.f.must(m.w.f.api.Delete(m.w.f.ctx, m.obj(r.name)))
	r.deleting = true
}

// writePhase writes a v1alpha1 phase over the status, as the original
// operator does on every pass: the conversion webhook's functions turn the
// object into v1alpha1 and back. The resource is then reconciled.
func (m *model) writePhase(rt *rapid.T) {
	r := m.pick(rt)
	phase := rapid.SampledFrom([]v1alpha1.Phase{v1alpha1.PhasePending, v1alpha1.PhaseRegistering, v1alpha1.PhaseReady, ""}).Draw(rt, "phase")
	m.w.f.writeStatus(m.obj(r.name), func(o *v1beta1.LBRegistrar) {
		var alpha v1alpha1.LBRegistrar
		v1alpha1.FromHub(o, &alpha)
		alpha.Status.Phase = phase
		var back v1beta1.LBRegistrar
		v1alpha1.ToHub(&alpha, &back)
		o.Status = back.Status
	})
	m.w.f.updateRegistrar(m.obj(r.name), func(o *v1beta1.LBRegistrar) {
		o.Annotations = map[string]string{"model/touched": strconv.Itoa(m.next())}
		if r.replaces != "" {
			o.Annotations[validation.ReplacesAnnotation] = r.replaces
		}
	})
}

// restart stops the controller and starts another, as a new leader.
func (m *model) restart(*rapid.T) {
	m.w.stop()
	_, m.w.stop = m.w.f.startManager(m.w.opts)
}

func (m *model) waitDrain(*rapid.T) { time.Sleep(modelDrain) }

// faultOnce makes OCI refuse the next writes of a backend set with a
// status the controller retries.
func (m *model) faultOnce(rt *rapid.T) {
	set := rapid.SampledFrom(modelSets).Draw(rt, "set")
	status := rapid.SampledFrom([]int{409, 429, 500}).Draw(rt, "status")
	m.w.f.emu.AddFault(ociemu.Fault{Operation: "UpdateBackendSet", LoadBalancerID: set.lb, BackendSet: set.name, Status: status,
		Times: rapid.IntRange(1, 2).Draw(rt, "times")})
}

func (m *model) obj(name string) *v1beta1.LBRegistrar {
	return &v1beta1.LBRegistrar{ObjectMeta: metav1.ObjectMeta{Name: name}}
}

// check waits for the world to settle and checks the invariants.
func (m *model) check(rt *rapid.T) {
	f := m.w.f
	// Generous: a reconcile that failed (a status write racing a forger's)
	// is retried with the workqueue's growing backoff, and make test runs
	// packages side by side on two cores.
	eventually.Passes(rt, time.Minute, 20*time.Millisecond, m.settled)
	eventually.Passes(rt, time.Minute, 100*time.Millisecond, m.gatesSettled)
	for key, b := range m.foreign {
		set, _, _ := strings.Cut(key, "/")
		if !slices.Contains(f.backends(m.lbOf(set), set), b) {
			rt.Fatalf("foreign backend %s was removed or changed: %s holds %v", key, set, f.backends(m.lbOf(set), set))
		}
	}
}

func (m *model) lbOf(set string) string {
	for _, s := range modelSets {
		if s.name == set {
			return s.lb
		}
	}
	if set == modelPodSet {
		return classicLB
	}
	return ""
}

// settled is nil once deleted resources are gone, every holder is Ready
// with what it wants registered and serving, nothing else of lbregistrar's
// is registered, and every record names only present, non-foreign
// backends.
func (m *model) settled() error {
	f := m.w.f
	for name, r := range m.resources {
		if !r.deleting {
			continue
		}
		var obj v1beta1.LBRegistrar
		err := f.api.Get(f.ctx, client.ObjectKey{Name: name}, &obj)
		if err == nil {
			return fmt.Errorf("deleted resource %s still present: finalizers %v, Ready %+v", name, obj.Finalizers, meta.FindStatusCondition(obj.Status.Conditions, v1beta1.ConditionReady))
		}
		if !apierrors.IsNotFound(err) {
			return err
		}
		delete(m.resources, name)
	}
	wanted := map[string]string{} // set/ip:port -> backend as printed
	for _, s := range modelSets {
		h := m.holder(s)
		if h == nil {
			continue
		}
		var obj v1beta1.LBRegistrar
		if err := f.api.Get(f.ctx, client.ObjectKey{Name: h.name}, &obj); err != nil {
			return err
		}
		ready := meta.FindStatusCondition(obj.Status.Conditions, v1beta1.ConditionReady)
		if obj.Status.ObservedGeneration != obj.Generation || ready == nil || ready.Status != metav1.ConditionTrue {
			return fmt.Errorf("%s (holding %s) not Ready at generation %d: %+v", h.name, s, obj.Generation, ready)
		}
		for _, ip := range m.nodes {
			b := fmt.Sprintf("%s:%d/1", ip, h.port)
			wanted[s.name+"/"+backendKey(b)] = b
		}
	}
	for _, s := range modelSets {
		present := f.backends(s.lb, s.name)
		for _, b := range present {
			key := s.name + "/" + backendKey(b)
			if want, ok := wanted[key]; ok && b != want {
				return fmt.Errorf("%s is registered as %s, want %s (serving, at its weight)", key, b, want)
			}
			if _, ok := wanted[key]; !ok && m.foreign[key] == "" && !m.leakable[key] && !m.keptByClaimant(s, key) {
				return fmt.Errorf("%s is registered, but no live resource wants it", b)
			}
		}
		for key, want := range wanted {
			if set, _, _ := strings.Cut(key, "/"); set == s.name && !slices.Contains(present, want) {
				return fmt.Errorf("%s is wanted but %s holds %v", want, s.name, present)
			}
		}
	}
	var list v1beta1.LBRegistrarList
	if err := f.api.List(f.ctx, &list); err != nil {
		return err
	}
	for _, obj := range list.Items {
		if !strings.HasPrefix(obj.Name, m.prefix+"-") {
			continue
		}
		for _, rec := range obj.Status.BackendSets {
			present := f.backends(m.lbOf(rec.Name), rec.Name)
			for _, b := range rec.Owned() {
				key := rec.Name + "/" + plainKey(b.IP, b.Port)
				if m.foreign[key] != "" {
					return fmt.Errorf("%s records the foreign backend %s", obj.Name, key)
				}
				if !slices.ContainsFunc(present, func(p string) bool { return backendKey(p) == plainKey(b.IP, b.Port) }) {
					return fmt.Errorf("%s records %s, which %s does not hold", obj.Name, key, rec.Name)
				}
			}
		}
	}
	return nil
}

// keptByClaimant reports whether a live resource that claims set but does
// not hold it (the one a replacement took it over from) may still have
// key registered: such a resource writes nothing there, so what it
// registered before stays until it is deleted.
func (m *model) keptByClaimant(set modelSet, key string) bool {
	_, port := splitBackend(strings.TrimPrefix(key, set.name+"/"))
	h := m.holder(set)
	return slices.ContainsFunc(m.claimants(set), func(r *modelResource) bool { return !r.deleting && r != h && r.port == port })
}

// backendKey is the ip:port of a backend as backends() prints it.
func backendKey(printed string) string {
	key, _, _ := strings.Cut(printed, "/")
	return key
}

func plainKey(ip string, port int32) string { return ip + ":" + strconv.Itoa(int(port)) }

func splitBackend(key string) (string, int32) {
	i := strings.LastIndex(key, ":")
	port, _ := strconv.Atoi(key[i+1:])
	return key[:i], int32(port)
}
