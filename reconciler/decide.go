package reconciler

import (
	"context"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/peppy-ratio/lbregistrar/api/v1beta1"
	"github.com/peppy-ratio/lbregistrar/reconciler/backendset"
	"github.com/peppy-ratio/lbregistrar/reconciler/desired"
	"github.com/peppy-ratio/lbregistrar/reconciler/oci"
	"github.com/peppy-ratio/lbregistrar/reconciler/status"
)

// decide is what a reconcile of obj decides from the cluster and the
// backend sets read, given the backend sets another resource keeps (lost):
// what the desired state is and what is wrong with it (issues), and which
// backend sets to bring in line in which mode (held ones keep what is
// registered). The controller and lbregistrar plan both decide here, so the
// plan shows what the controller will do.
func decide(obj *v1beta1.LBRegistrar, cluster desired.Cluster, lost map[string]string, read map[string]*oci.BackendSet, o Options) (status.Outcome, []syncJob) {
	result := desired.Compute(&obj.Spec, cluster, desired.Options{RequireReady: o.RequireReadyNodes, BackendSets: takes(read)})
	out := status.Outcome{Lost: lost, Issues: result.Issues}
	return out, registerJobs(obj, result, &out, read, o.NodeDrainPeriod)
}

// assess gathers what decide needs and decides: the cluster as reader sees
// it, the backend sets obj loses to claimants, and its backend sets as OCI
// has them, read with ociClient (nil when obj's credentials cannot be used:
// nothing is read, and the desired state is decided without them). The
// controller's turn and lbregistrar plan both start here.
func assess(ctx context.Context, reader client.Reader, ociClient ociAPI, obj *v1beta1.LBRegistrar, claimants claimantsFunc, opts Options) (status.Outcome, []syncJob, error) {
	cluster, err := readView(ctx, reader, obj)
	if err != nil {
		return status.Outcome{}, nil, err
	}
	lost, err := lostClaims(obj, claimants)
	if err != nil {
		return status.Outcome{}, nil, err
	}
	var read map[string]*oci.BackendSet
	if ociClient != nil {
		read = backendset.ReadAll(ctx, ociClient, obj.Spec.LoadBalancerID, backendSetNames(obj, lost))
	}
	out, jobs := decide(obj, cluster, lost, read, opts)
	return out, jobs, nil
}
