package ociemu

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/oracle/oci-go-sdk/v65/common"
	"github.com/oracle/oci-go-sdk/v65/loadbalancer"
	"github.com/oracle/oci-go-sdk/v65/networkloadbalancer"
	"sigs.k8s.io/yaml"
)

// Seed is the emulator's state in the JSON shapes the two APIs return, so a
// load balancer fetched from OCI (or from State) can be seeded as it is.
// Missing mandatory response fields get plausible defaults; backend sets
// are keyed by name and their backends get OCI's names.
type Seed struct {
	LoadBalancers        []loadbalancer.LoadBalancer               `json:"loadBalancers,omitempty"`
	NetworkLoadBalancers []networkloadbalancer.NetworkLoadBalancer `json:"networkLoadBalancers,omitempty"`
	// Instances are the compute instances whose private IPs an NLB backend
	// may name as its targetId; they are seeded before the load balancers.
	Instances []Instance `json:"instances,omitempty"`
}

// LoadSeedFile reads a Seed from a YAML or JSON file.
func LoadSeedFile(path string) (Seed, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return Seed{}, err
	}
	var s Seed
	if err := yaml.UnmarshalStrict(data, &s); err != nil {
		return Seed{}, fmt.Errorf("%s: %w", path, err)
	}
	return s, nil
}

// balancer is one load balancer of either kind. Exactly one of classic and
// network is set. Backend sets live in the SDK struct's BackendSets map.
type balancer struct {
	classic *loadbalancer.LoadBalancer
	network *networkloadbalancer.NetworkLoadBalancer
	// generation and setGeneration count applied changes; etags derive
	// from them and from seeded, which is new each time the load balancer
	// is seeded, so a load balancer seeded again never repeats an etag.
	generation    uint64
	setGeneration map[string]uint64
	seeded        string
}

func newBalancer() *balancer {
	return &balancer{setGeneration: map[string]uint64{}, seeded: newOCID("seed", "")}
}

func (b *balancer) id() string {
	if b.classic != nil {
		return *b.classic.Id
	}
	return *b.network.Id
}

func (b *balancer) compartment() string {
	if b.classic != nil {
		return *b.classic.CompartmentId
	}
	return *b.network.CompartmentId
}

func (b *balancer) hasBackendSet(name string) bool {
	if b.classic != nil {
		_, ok := b.classic.BackendSets[name]
		return ok
	}
	_, ok := b.network.BackendSets[name]
	return ok
}

// changed records an applied change to the named backend sets.
func (b *balancer) changed(sets ...string) {
	b.generation++
	for _, s := range sets {
		b.setGeneration[s]++
	}
}

func (b *balancer) etag() string { return etagOf(b.seeded+"/"+b.id(), b.generation) }

func (b *balancer) setEtag(name string) string {
	return etagOf(b.seeded+"/"+b.id()+"/"+name, b.setGeneration[name])
}

func etagOf(key string, generation uint64) string {
	sum := sha256.Sum256([]byte(key + "#" + strconv.FormatUint(generation, 10)))
	return hex.EncodeToString(sum[:12])
}

const defaultCompartment = "ocid1.compartment.oc1..emulatorcompartment"

// SeedState adds the load balancers in s, replacing any with the same OCID.
func (e *Emulator) SeedState(s Seed) error {
	if err := e.seedInstances(s.Instances); err != nil {
		return err
	}
	var prepared []*balancer
	for i := range s.LoadBalancers {
		b, err := prepareClassic(copyJSON(s.LoadBalancers[i]), i)
		if err != nil {
			return err
		}
		prepared = append(prepared, b)
	}
	for i := range s.NetworkLoadBalancers {
		b, err := e.prepareNetwork(copyJSON(s.NetworkLoadBalancers[i]), i)
		if err != nil {
			return err
		}
		prepared = append(prepared, b)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, b := range prepared {
		e.balancers[b.id()] = b
	}
	return nil
}

func prepareClassic(lb loadbalancer.LoadBalancer, index int) (*balancer, error) {
	field := fmt.Sprintf("loadBalancers[%d]", index)
	if lb.Id == nil || *lb.Id == "" {
		return nil, fmt.Errorf("%s.id is required", field)
	}
	if strings.Contains(*lb.Id, ".networkloadbalancer.") {
		return nil, fmt.Errorf("%s.id %q is a network load balancer OCID; seed it under networkLoadBalancers", field, *lb.Id)
	}
	setDefault(&lb.CompartmentId, defaultCompartment)
	setDefault(&lb.DisplayName, "lb-"+strconv.Itoa(index))
	setDefault(&lb.ShapeName, "flexible")
	if lb.LifecycleState == "" {
		lb.LifecycleState = loadbalancer.LoadBalancerLifecycleStateActive
	}
	if lb.TimeCreated == nil {
		lb.TimeCreated = &common.SDKTime{Time: time.Now().UTC().Truncate(time.Millisecond)}
	}
	if lb.IpAddresses == nil {
		lb.IpAddresses = []loadbalancer.IpAddress{{IpAddress: common.String(fmt.Sprintf("192.0.2.%d", 1+index%250)), IsPublic: common.Bool(true)}}
	}
	if lb.BackendSets == nil {
		lb.BackendSets = map[string]loadbalancer.BackendSet{}
	}
	b := newBalancer()
	b.classic = &lb
	for name, set := range lb.BackendSets {
		where := fmt.Sprintf("%s.backendSets[%s]", field, name)
		set.Name = common.String(name)
		if err := backendSetNameRule(name); err != nil {
			return nil, fmt.Errorf("%s: %w", where, err)
		}
		if set.Policy == nil || set.HealthChecker == nil {
			return nil, fmt.Errorf("%s: policy and healthChecker are required", where)
		}
		for j := range set.Backends {
			if err := normalizeClassicBackend(&set.Backends[j]); err != nil {
				return nil, fmt.Errorf("%s.backends[%d]: %s", where, j, err.message)
			}
		}
		lb.BackendSets[name] = set
	}
	return b, classicFamily.seeded(b, field)
}

// normalizeClassicBackend checks a backend against the rules on its values
// and fills in its name and defaults.
func normalizeClassicBackend(be *loadbalancer.Backend) *apiError {
	if be.IpAddress == nil || be.Port == nil {
		return invalidParameter("ipAddress and port are required")
	}
	be.Name = common.String(classicBackendName(*be.IpAddress, *be.Port))
	setDefault(&be.Weight, 1)
	setDefault(&be.Drain, false)
	setDefault(&be.Backup, false)
	setDefault(&be.Offline, false)
	return classicBackendRules(be)
}

func (e *Emulator) prepareNetwork(nlb networkloadbalancer.NetworkLoadBalancer, index int) (*balancer, error) {
	field := fmt.Sprintf("networkLoadBalancers[%d]", index)
	if nlb.Id == nil || *nlb.Id == "" {
		return nil, fmt.Errorf("%s.id is required", field)
	}
	if !strings.Contains(*nlb.Id, ".networkloadbalancer.") {
		return nil, fmt.Errorf("%s.id %q is not a network load balancer OCID (ocid1.networkloadbalancer...)", field, *nlb.Id)
	}
	setDefault(&nlb.CompartmentId, defaultCompartment)
	setDefault(&nlb.DisplayName, "nlb-"+strconv.Itoa(index))
	setDefault(&nlb.SubnetId, "ocid1.subnet.oc1..emulatorsubnet")
	if nlb.LifecycleState == "" {
		nlb.LifecycleState = networkloadbalancer.LifecycleStateActive
	}
	if nlb.TimeCreated == nil {
		nlb.TimeCreated = &common.SDKTime{Time: time.Now().UTC().Truncate(time.Millisecond)}
	}
	if nlb.IpAddresses == nil {
		nlb.IpAddresses = []networkloadbalancer.IpAddress{{IpAddress: common.String(fmt.Sprintf("198.51.100.%d", 1+index%250)), IsPublic: common.Bool(true)}}
	}
	if nlb.BackendSets == nil {
		nlb.BackendSets = map[string]networkloadbalancer.BackendSet{}
	}
	b := newBalancer()
	b.network = &nlb
	for name, set := range nlb.BackendSets {
		where := fmt.Sprintf("%s.backendSets[%s]", field, name)
		set.Name = common.String(name)
		if err := backendSetNameRule(name); err != nil {
			return nil, fmt.Errorf("%s: %w", where, err)
		}
		if set.HealthChecker == nil {
			return nil, fmt.Errorf("%s: healthChecker is required", where)
		}
		if set.Policy == "" {
			set.Policy = networkloadbalancer.NetworkLoadBalancingPolicyFiveTuple
		}
		if set.Backends == nil {
			set.Backends = []networkloadbalancer.Backend{}
		}
		for j := range set.Backends {
			be, err := networkBackend(set.Backends[j])
			if err == nil {
				err = e.admissible(b, &set, be)
			}
			if err != nil {
				return nil, fmt.Errorf("%s.backends[%d]: %s", where, j, err.message)
			}
			set.Backends[j] = be
		}
		nlb.BackendSets[name] = set
	}
	return b, networkFamily.seeded(b, field)
}

// classicBackendName is how the Load Balancing service names a backend.
func classicBackendName(ip string, port int) string { return ip + ":" + strconv.Itoa(port) }

// networkBackendName is the name the Network Load Balancer service gives a
// backend created without one: its IP address or target OCID and port.
func networkBackendName(ip, targetID *string, port int) string {
	if ip != nil && *ip != "" {
		return *ip + ":" + strconv.Itoa(port)
	}
	return *targetID + ":" + strconv.Itoa(port)
}

func setDefault[T any](p **T, v T) {
	if *p == nil {
		*p = &v
	}
}

// copyJSON deep-copies a value through its JSON form, which for these SDK
// types is lossless.
func copyJSON[T any](v T) T { return convertJSON[T](v) }

// convertJSON makes a T of v's JSON form: the SDK's write shapes (…Details)
// and read shapes share their JSON field names, so a request's details
// become the stored resource field for field, and what the request leaves
// out is left zero.
func convertJSON[T any](v any) T {
	data, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("ociemu: converting %T: %v", v, err))
	}
	var out T
	if err := json.Unmarshal(data, &out); err != nil {
		panic(fmt.Sprintf("ociemu: converting %T: %v", v, err))
	}
	return out
}

// State returns a copy of every load balancer and instance, in the Seed shape.
func (e *Emulator) State() Seed {
	e.mu.Lock()
	defer e.mu.Unlock()
	var s Seed
	for _, id := range e.sortedBalancerIDs() {
		b := e.balancers[id]
		if b.classic != nil {
			s.LoadBalancers = append(s.LoadBalancers, copyJSON(*b.classic))
		} else {
			s.NetworkLoadBalancers = append(s.NetworkLoadBalancers, copyJSON(*b.network))
		}
	}
	s.Instances = e.Instances()
	return s
}

func (e *Emulator) sortedBalancerIDs() []string {
	ids := make([]string, 0, len(e.balancers))
	for id := range e.balancers {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	return ids
}

// Backend is a backend of either kind of load balancer, as tests want to
// compare them.
type Backend struct {
	Name      string `json:"name"`
	IPAddress string `json:"ipAddress,omitempty"`
	TargetID  string `json:"targetId,omitempty"`
	Port      int    `json:"port"`
	Weight    int    `json:"weight"`
	Drain     bool   `json:"drain,omitempty"`
	Backup    bool   `json:"backup,omitempty"`
	Offline   bool   `json:"offline,omitempty"`
}

// Backends returns the backends of a backend set in the order the API lists them.
func (e *Emulator) Backends(loadBalancerID, backendSetName string) ([]Backend, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	b := e.balancers[loadBalancerID]
	if b == nil {
		return nil, fmt.Errorf("no load balancer %s", loadBalancerID)
	}
	if !b.hasBackendSet(backendSetName) {
		return nil, fmt.Errorf("load balancer %s has no backend set %q", loadBalancerID, backendSetName)
	}
	out := []Backend{}
	if b.classic != nil {
		for _, be := range b.classic.BackendSets[backendSetName].Backends {
			out = append(out, Backend{
				Name: deref(be.Name), IPAddress: deref(be.IpAddress), Port: deref(be.Port), Weight: deref(be.Weight),
				Drain: deref(be.Drain), Backup: deref(be.Backup), Offline: deref(be.Offline),
			})
		}
		return out, nil
	}
	for _, be := range b.network.BackendSets[backendSetName].Backends {
		out = append(out, Backend{
			Name: deref(be.Name), IPAddress: deref(be.IpAddress), TargetID: deref(be.TargetId), Port: deref(be.Port),
			Weight: deref(be.Weight), Drain: deref(be.IsDrain), Backup: deref(be.IsBackup), Offline: deref(be.IsOffline),
		})
	}
	return out, nil
}

// LifecycleState is the load balancer's lifecycle state, "" if unknown.
func (e *Emulator) LifecycleState(loadBalancerID string) string {
	e.mu.Lock()
	defer e.mu.Unlock()
	b := e.balancers[loadBalancerID]
	switch {
	case b == nil:
		return ""
	case b.classic != nil:
		return string(b.classic.LifecycleState)
	default:
		return string(b.network.LifecycleState)
	}
}

func deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}

// newOCID makes an OCID of the given resource type; region may be empty.
func newOCID(resourceType, region string) string {
	var b [20]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(err)
	}
	const alphabet = "abcdefghijklmnopqrstuvwxyz234567"
	var unique strings.Builder
	unique.WriteString("aaaaaaaa")
	for _, c := range b {
		unique.WriteByte(alphabet[int(c)%len(alphabet)])
	}
	return fmt.Sprintf("ocid1.%s.oc1.%s.%s", resourceType, region, unique.String())
}
