package webhook

import (
	"github.com/prometheus/client_golang/prometheus"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
)

// validationFailures counts admission requests refused, once per broken rule.
var validationFailures = prometheus.NewCounterVec(prometheus.CounterOpts{
	Name: "lbregistrar_validation_failures_total",
	Help: "Admission requests refused, by API version and broken validation rule (one count per rule per request).",
}, []string{"version", "rule"})

func init() {
	crmetrics.Registry.MustRegister(validationFailures)
}
