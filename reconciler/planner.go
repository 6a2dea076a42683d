package reconciler

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"time"

	"github.com/oracle/oci-go-sdk/v65/common"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/peppy-ratio/lbregistrar/api/v1beta1"
	"github.com/peppy-ratio/lbregistrar/reconciler/credentials"
	"github.com/peppy-ratio/lbregistrar/reconciler/decide"
	"github.com/peppy-ratio/lbregistrar/reconciler/desired"
	"github.com/peppy-ratio/lbregistrar/reconciler/oci"
	"github.com/peppy-ratio/lbregistrar/reconciler/ownership"
	"github.com/peppy-ratio/lbregistrar/reconciler/plan"
	"github.com/peppy-ratio/lbregistrar/reconciler/preview"
	"github.com/peppy-ratio/lbregistrar/reconciler/status"
)

// Planner computes what the controller would write for resources read from
// a cluster, with the controller's own decisions (decide.Assess) and plans
// (plan.Compute), and writes nothing: it reads the cluster through its reader
// and backend sets from OCI. lbregistrar plan uses it.
type Planner struct {
	reader   client.Reader
	secrets  *credentials.Secrets
	builders credentials.Builders[ociAPI]
	opts     Options
	apiKey   *oci.Credentials
	keys     *ownership.KeyStore
}

// NewPlanner returns a Planner reading through reader, reaching OCI as o
// says and computing the desired state with o's options. apiKey, when
// given, signs every OCI call instead of the resources' own API keys, in
// the region each resource names.
func NewPlanner(reader client.Reader, o Options, apiKey *oci.Credentials) (*Planner, error) {
	factory, err := o.ociFactory()
	if err != nil {
		return nil, err
	}
	return newPlanner(reader, func(c oci.Credentials) (ociAPI, error) { return factory.Client(c) }, o, apiKey), nil
}

func newPlanner(reader client.Reader, build func(oci.Credentials) (ociAPI, error), o Options, apiKey *oci.Credentials) *Planner {
	// API keys are read where serve reads them, so a Secret serve would
	// refuse is planned as refused.
	secrets := credentials.NewSecrets(reader, o.SecretNamespaces)
	records := &ownership.KeyStore{Reader: reader, Secret: o.RecordKey}
	return &Planner{reader: reader, secrets: secrets, builders: credentials.Builders[ociAPI]{Key: build}, opts: o, apiKey: apiKey, keys: records}
}

// planSignInWait is how long a plan waits for a keyless sign-in: it has no
// retry soon after, as a reconcile has.
const planSignInWait = 3 * time.Minute

// SignInAsTheController lets p sign resources in without an API key, as
// serve does: the workload identity of the ServiceAccount each names (its
// token requested through tokens, as cfg's user, who must be allowed to,
// as lbregistrar's own ServiceAccount is), and, where the options allow
// it, the controller's own identity (Options.ControllerUser) or the
// instance it runs on. lbregistrar plan --keyless, run in the cluster as
// lbregistrar's ServiceAccount (config/plan-job), plans keyless resources
// so.
func (p *Planner) SignInAsTheController(cfg *rest.Config, tokens client.Client) error {
	o := p.opts
	o.OCI.SignInWait = planSignInWait
	factory, err := o.ociFactory()
	if err != nil {
		return err
	}
	workloadIdentity, err := o.workloadIdentity(cfg, tokens)
	if err != nil {
		return err
	}
	p.builders = o.builders(p.builders.Key, func(identity, region string, newProvider func() (common.ConfigurationProvider, error)) (ociAPI, error) {
		return factory.SessionClient(identity, region, newProvider)
	}, workloadIdentity)
	return nil
}

// ResourcePlan is what one reconcile of a resource would do.
type ResourcePlan struct {
	LBRegistrar    string                     `json:"lbregistrar"`
	LoadBalancerID string                     `json:"loadBalancerId"`
	BackendSets    []preview.BackendSetChange `json:"backendSets"`
	// Conditions are those the reconcile would set once its writes succeed.
	Conditions []metav1.Condition `json:"conditions"`
	// Error says why the backend sets could not be read (the API key).
	Error string `json:"error,omitempty"`
	// RecordIgnored says why the resource's ownership record was planned
	// as if there were none, as the controller does with a record it
	// cannot vouch for: nothing it lists is removed.
	RecordIgnored string `json:"recordIgnored,omitempty"`
	// Suspended: spec.suspend is true, and nothing would be written.
	Suspended bool `json:"suspended,omitempty"`
	// DeletionPolicy is the resource's (Delete when unset).
	DeletionPolicy v1beta1.DeletionPolicy `json:"deletionPolicy"`
	// Deletion, in a plan of the resource's deletion, says what it would do
	// to the backends BackendSets lists: drained for a period and then
	// removed, or kept and why.
	Deletion string `json:"deletion,omitempty"`
}

// Plan plans obj; all are the resources whose claims it is weighed
// against (every resource of the cluster; obj among them is ignored).
func (p *Planner) Plan(ctx context.Context, obj *v1beta1.LBRegistrar, all []v1beta1.LBRegistrar) (ResourcePlan, error) {
	rp, obj, claimants := p.open(ctx, obj, obj.Spec.LoadBalancerID, all)
	if obj.Spec.Suspend {
		rp.Suspended = true
		status.SetSuspended(obj)
		rp.Conditions = obj.Status.Conditions
		return rp, nil
	}
	ociClient, err := p.ociClientFor(ctx, obj)
	var ce *credentials.Error
	if err != nil && !errors.As(err, &ce) {
		return rp, err
	}
	out, jobs, err := decide.Assess(ctx, p.reader, ociClient, obj, claimants, p.opts.decide())
	if err != nil {
		return rp, err
	}
	if ce != nil {
		rp.Error = ce.Message
	} else {
		rp.BackendSets = decide.Changes(ctx, ociClient, obj, rp.LoadBalancerID, jobs, &out)
	}
	if ce != nil {
		out.Unusable = &status.Failure{Reason: ce.Reason, Message: ce.Message}
	}
	status.SetConditions(obj, &out)
	rp.Conditions = obj.Status.Conditions
	return rp, nil
}

// PlanDeletion is what deleting obj would do to the backends it recorded in
// the load balancer its record names: kept (deletionPolicy Orphan, or
// suspended), or drained for the drain period and then removed, which
// BackendSets shows as the removal.
func (p *Planner) PlanDeletion(ctx context.Context, obj *v1beta1.LBRegistrar, all []v1beta1.LBRegistrar) (ResourcePlan, error) {
	rp, obj, claimants := p.open(ctx, obj, recordedLoadBalancer(obj), all)
	if why := decide.Orphans(obj); why != "" {
		rp.Deletion = "kept: " + why
		return rp, nil
	}
	rp.Deletion = fmt.Sprintf("drained for %s, then removed", p.opts.decide().DrainFor(plan.ResourceDeleted))
	ociClient, err := p.ociClientFor(ctx, obj)
	var ce *credentials.Error
	switch {
	case errors.As(err, &ce):
		rp.Error = ce.Message
		return rp, nil
	case err != nil:
		return rp, err
	}
	var out status.Outcome
	jobs := decide.Removals(obj, rp.LoadBalancerID, plan.Remove, 0, claimants, &out)
	rp.BackendSets = decide.Changes(ctx, ociClient, obj, rp.LoadBalancerID, jobs, &out)
	return rp, nil
}

// open starts the plan of obj in load balancer lb: a copy of obj whose
// ownership record is dropped when it cannot be vouched for, and the claims
// of all but obj.
func (p *Planner) open(ctx context.Context, obj *v1beta1.LBRegistrar, lb string, all []v1beta1.LBRegistrar) (ResourcePlan, *v1beta1.LBRegistrar, decide.Claimants) {
	obj = obj.DeepCopy()
	rp := ResourcePlan{LBRegistrar: obj.Name, LoadBalancerID: lb, BackendSets: []preview.BackendSetChange{},
		DeletionPolicy: cmp.Or(obj.Spec.DeletionPolicy, v1beta1.DeletionPolicyDelete)}
	// Without the key (no read access to its Secret) no record can be
	// vouched for: the plan then shows what the controller would do were
	// every record forged, which never removes more.
	key, keyErr := p.keys.Key(ctx)
	switch {
	case !ownership.Recorded(obj):
	case keyErr != nil:
		rp.RecordIgnored = "the ownership record cannot be verified: " + keyErr.Error()
	case !ownership.Vouched(key, obj):
		rp.RecordIgnored = "the ownership record does not carry the controller's signature"
	}
	if rp.RecordIgnored != "" {
		ownership.Drop(obj)
	}
	return rp, obj, decide.Among(all, obj.Name).Vouched(key)
}

// ociClientFor is the OCI client for obj: its own API key, or the one
// given, unless the controller would not use obj's identity at all.
func (p *Planner) ociClientFor(ctx context.Context, obj *v1beta1.LBRegistrar) (ociAPI, error) {
	if p.apiKey == nil {
		return credentials.ClientFor(ctx, p.secrets, p.builders, obj)
	}
	if err := credentials.UncheckedIdentity(obj); err != nil {
		return nil, err
	}
	creds := *p.apiKey
	creds.Region = obj.Spec.Region()
	return credentials.Client(p.builders.Key, creds)
}

// Unrecorded is a backend that no LBRegistrar of the cluster records and
// whose address (or instance) no node of the cluster has: left by a
// cluster that is gone, registered by hand or by another tool, or listed
// by a record lbregistrar could not vouch for. lbregistrar never removes
// it; a person may.
type Unrecorded struct {
	LoadBalancerID string `json:"loadBalancerId"`
	BackendSet     string `json:"backendSet"`
	Backend        string `json:"backend"`
	Weight         int32  `json:"weight"`
}

// Unrecorded lists, in the backend sets plans read, the backends the plans
// keep as not their resource's that no resource of all records (with a
// record the controller signed) and that no node of the cluster is.
func (p *Planner) Unrecorded(ctx context.Context, plans []ResourcePlan, all []v1beta1.LBRegistrar) ([]Unrecorded, error) {
	key, err := p.keys.Key(ctx)
	if err != nil {
		key = nil // no record can be vouched for: none counts
	}
	recorded := map[string]bool{}
	for i := range all {
		obj := &all[i]
		if !ownership.Vouched(key, obj) {
			continue
		}
		for _, rec := range obj.Status.BackendSets {
			for _, b := range rec.Owned() {
				recorded[obj.Status.LoadBalancerID+"/"+rec.Name+"/"+plan.Key(b.IP, b.Port)] = true
			}
		}
	}
	var nodes corev1.NodeList
	if err := p.reader.List(ctx, &nodes); err != nil {
		return nil, err
	}
	isNode := map[string]bool{}
	for _, n := range nodes.Items {
		for _, a := range n.Status.Addresses {
			isNode[plan.Key(a.Address, 0)] = true
		}
		if id := desired.InstanceID(&n); id != "" {
			isNode[id] = true
		}
	}
	var out []Unrecorded
	seen := map[string]bool{}
	for _, rp := range plans {
		for _, c := range rp.BackendSets {
			for _, b := range c.Kept {
				id := c.LoadBalancerID + "/" + c.BackendSet + "/" + b.Backend
				if !b.Foreign || recorded[id] || seen[id] || isNode[nodeOf(b.Backend)] {
					continue
				}
				seen[id] = true
				out = append(out, Unrecorded{LoadBalancerID: c.LoadBalancerID, BackendSet: c.BackendSet, Backend: b.Backend, Weight: b.Weight})
			}
		}
	}
	return out, nil
}

// nodeOf is what identifies the node of a backend key: its address as
// plan.Key writes it with port 0, or its instance OCID.
func nodeOf(backend string) string {
	if instance, ok := strings.CutPrefix(backend, "instance "); ok {
		return instance[:strings.LastIndexByte(instance, ':')]
	}
	host, _, err := net.SplitHostPort(backend)
	if err != nil {
		return backend
	}
	return plan.Key(host, 0)
}
