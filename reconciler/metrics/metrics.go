// Package metrics contains the reconciler's Prometheus metrics, registered with
// controller-runtime's registry so the manager's metrics endpoint serves them.
package metrics

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
)

var (
	// OCIRequests counts OCI API calls by operation and result
	// (ok, or the HTTP status / error class).
	OCIRequests = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "lbregistrar_oci_requests_total",
		Help: "OCI API calls by operation and result.",
	}, []string{"operation", "result"})

	// WorkRequestDuration observes how long OCI work requests take, by load balancer kind and outcome.
	WorkRequestDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "lbregistrar_work_request_duration_seconds",
		Help:    "Time from an UpdateBackendSet until its work request finished.",
		Buckets: prometheus.ExponentialBuckets(0.05, 2, 14),
	}, []string{"kind", "status"})

	// Retries counts retried backend-set writes by retry class.
	Retries = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "lbregistrar_oci_retries_total",
		Help: "Backend-set writes retried, by retry class (conflict, precondition, throttled, server, network, workrequest).",
	}, []string{"class"})

	// Conflicts counts reconciles in which another LBRegistrar was the holder
	// of a claimed backend set.
	Conflicts = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "lbregistrar_claim_conflicts_total",
		Help: "Backend sets skipped because an earlier LBRegistrar claims them.",
	})

	// UnverifiedRecords counts ownership records set aside because the
	// controller's signature did not verify.
	UnverifiedRecords = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "lbregistrar_unverified_records_total",
		Help: "Ownership records ignored because they do not carry this controller's signature (written by another writer, restored, or planted before install).",
	})

	// PendingChanges is the number of resources waiting for their load balancer's lane.
	PendingChanges = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "lbregistrar_pending_changes",
		Help: "LBRegistrars waiting for another write to the same load balancer to finish; their changes go into the next write.",
	})

	// Flights is the number of load balancers being written: reconciles
	// that have a lane and go on without a worker (reads, writes, waits for
	// work requests).
	Flights = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "lbregistrar_flights",
		Help: "Load balancers whose backend sets are being read, written and waited for, each by one resource that has its lane, without occupying a reconcile worker.",
	})

	// FlightDuration observes each flight by result (FlightSuccess,
	// FlightError, FlightPanic) once it lands. A flight fails after its
	// reconcile has returned, so controller-runtime's reconcile errors and
	// times never see its writes and work-request waits; these do.
	FlightDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "lbregistrar_flight_duration_seconds",
		Help: "Time from a flight's launch until it landed, by result (success, error, panic): reading, writing and waiting for the work requests of a load balancer's backend sets, which the reconcile that launched it does not include.",
		// From a read that finds nothing to write to several work requests
		// of tens of seconds, each waited for up to --work-request-timeout.
		Buckets: []float64{0.1, 0.25, 0.5, 1, 2.5, 5, 10, 20, 30, 60, 120, 300, 600, 1200, 1800},
	}, []string{"result"})

	// EndpointBatchDuration observes each batch of endpoint changes as it
	// closes: how long its first change waited for the changes after it
	// before its reconcile was queued (--endpoint-batch-quiet,
	// --endpoint-batch-period), a wait the work queue's own metrics do not
	// see.
	EndpointBatchDuration = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "lbregistrar_endpoint_batch_duration_seconds",
		Help:    "Time from the first endpoint change of a resource's batch until the batch closed and the resource was queued for a reconcile: at most --endpoint-batch-period, less once the changes paused for --endpoint-batch-quiet.",
		Buckets: []float64{0.05, 0.1, 0.2, 0.4, 0.8, 1.6, 3.2, 6.4},
	})

	// OldestFlightStart is when the oldest flight in the air was launched,
	// 0 with none: a flight stuck on a work request shows here before it
	// lands, as workqueue_longest_running_processor_seconds showed a
	// reconcile that occupied its worker.
	OldestFlightStart = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "lbregistrar_oldest_flight_start_time_seconds",
		Help: "Unix time the oldest flight in the air was launched, 0 when none is; time() minus it is how long that flight has been reading, writing and waiting.",
	})

	// PendingWrites counts, under serve --dry-run, the writes not made per
	// load balancer and backend set: 0 once a reconcile finds nothing to write.
	PendingWrites = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "lbregistrar_pending_writes",
		Help: "Backend-set writes serve --dry-run planned and did not make, per load balancer and backend set.",
	}, []string{"load_balancer", "backend_set"})

	// BackendsRegistered is the number of backends each resource owns per backend set.
	BackendsRegistered = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "lbregistrar_backends_registered",
		Help: "Backends an LBRegistrar owns, per backend set.",
	}, []string{"lbregistrar", "backend_set"})

	// BackendsDraining is the number of owned backends each resource keeps
	// drained per backend set, their nodes gone, until the node drain
	// period is over.
	BackendsDraining = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "lbregistrar_backends_draining",
		Help: "Backends an LBRegistrar keeps drained, per backend set, because it no longer wants them (their node left, was excluded, or stopped hosting endpoints), until the node drain period is over.",
	}, []string{"lbregistrar", "backend_set"})

	// BackendsWithheld is the number of wanted backends each resource
	// could not add per backend set because OCI refused them (a limit, bad
	// input); the backend set is written without them meanwhile.
	BackendsWithheld = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "lbregistrar_backends_withheld",
		Help: "Wanted backends an LBRegistrar could not add, per backend set, because OCI refused them (a limit, bad input); removals and weight changes go on without them, and they are tried again with backoff.",
	}, []string{"lbregistrar", "backend_set"})

	// BackendLimitUsed is the part of OCI's backend limit a backend set
	// uses with what it is wanted to have, so a set near it is seen before
	// additions are refused.
	BackendLimitUsed = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "lbregistrar_backend_limit_used_ratio",
		Help: "Backends a backend set has or is wanted to have (refused ones included), as a part of the most OCI lets it have (512, or 2 in a non-preemptive NLB backend set), per LBRegistrar and backend set.",
	}, []string{"lbregistrar", "backend_set"})

	// NodeDrains counts departing nodes' backends by what became of their
	// drain: started, ended (removed after the drain period) or called_off
	// (wanted again before it was over, so serving again).
	NodeDrains = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "lbregistrar_node_drains_total",
		Help: "Backends of departing nodes whose drain started, ended (removed after the node drain period), or was called off (the node wanted again).",
	}, []string{"event"})
)

// The readiness gates' waits (reconciler/gates).
var (
	// GatesWaiting is the number of pods whose readiness gate is False, by
	// why (readiness.WaitRegistering, WaitHealth, WaitBlocked).
	GatesWaiting = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "lbregistrar_readiness_gates_waiting",
		Help: "Pods whose lbregistrar readiness gate is False, by why: registering (their backend is being written), health (written; OCI's health check has not passed) or blocked (the controller cannot write it: Conflict, identity, OCI refusing, suspended).",
	}, []string{"wait"})

	// OldestGateWaitStart is since when the pod that has waited longest
	// for its gate has waited, 0 when none waits.
	OldestGateWaitStart = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "lbregistrar_readiness_gate_oldest_wait_start_time_seconds",
		Help: "Unix time since which the pod waiting longest for its lbregistrar readiness gate has waited, 0 when none waits; time() minus it is how long a rollout has been kept waiting.",
	})

	// ResourceCondition is each resource's conditions as its status has
	// them: alerts on state (Stalled, not Ready), not only on calls.
	ResourceCondition = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "lbregistrar_resource_condition",
		Help: "1 for each condition of each LBRegistrar (Ready, Reconciling, Stalled, Degraded, Conflict, Suspended), with its status and reason as the controller last wrote them; one series per resource and type.",
	}, []string{"lbregistrar", "type", "status", "reason"})
)

// SetConditions exports the conditions of resource's status. A type's
// series is replaced only when its status or reason changed, so an alert's
// "for" never sees it missing.
func SetConditions(resource string, conditions []metav1.Condition) {
	exported.mu.Lock()
	defer exported.mu.Unlock()
	for _, c := range conditions {
		key, now := [2]string{resource, c.Type}, [2]string{string(c.Status), c.Reason}
		if was, ok := exported.last[key]; ok && was != now {
			ResourceCondition.DeleteLabelValues(resource, c.Type, was[0], was[1])
		}
		exported.last[key] = now
		ResourceCondition.WithLabelValues(resource, c.Type, now[0], now[1]).Set(1)
	}
}

// exported is the status and reason ResourceCondition has per resource and
// condition type.
var exported = struct {
	mu   sync.Mutex
	last map[[2]string][2]string
}{last: map[[2]string][2]string{}}

// perBackendSet are the gauges labelled by resource and backend set.
var perBackendSet = []*prometheus.GaugeVec{BackendsRegistered, BackendsDraining, BackendsWithheld, BackendLimitUsed}

// ForgetBackendSet deletes the series of a resource's backend set that it
// no longer has an entry for.
func ForgetBackendSet(resource, backendSet string) {
	for _, g := range perBackendSet {
		g.DeleteLabelValues(resource, backendSet)
	}
}

// PerResource drops the series of a resource that is gone.
var PerResource perResource

type perResource struct{}

// Forget deletes every series labelled with the resource.
func (perResource) Forget(name string) {
	for _, g := range perBackendSet {
		g.DeletePartialMatch(prometheus.Labels{"lbregistrar": name})
	}
	exported.mu.Lock()
	defer exported.mu.Unlock()
	ResourceCondition.DeletePartialMatch(prometheus.Labels{"lbregistrar": name})
	for key := range exported.last {
		if key[0] == name {
			delete(exported.last, key)
		}
	}
}

// Results of a flight: the result label of FlightDuration.
const (
	FlightSuccess = "success"
	FlightError   = "error"
	FlightPanic   = "panic"
)

func init() {
	crmetrics.Registry.MustRegister(OCIRequests, WorkRequestDuration, Retries, Conflicts, UnverifiedRecords, PendingChanges, Flights, FlightDuration, EndpointBatchDuration, OldestFlightStart, PendingWrites, BackendsRegistered, BackendsDraining, BackendsWithheld, BackendLimitUsed, NodeDrains, GatesWaiting, OldestGateWaitStart, ResourceCondition)
	// Every result exported from the start, at 0, so an alert on failed
	// flights has a series to rate before the first one fails.
	for _, result := range []string{FlightSuccess, FlightError, FlightPanic} {
		FlightDuration.WithLabelValues(result)
	}
	for _, wait := range []string{"registering", "health", "blocked"} {
		GatesWaiting.WithLabelValues(wait)
	}
}
