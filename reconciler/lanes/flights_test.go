package lanes

import (
	"errors"
	"testing"
	"time"

	"github.com/go-logr/logr"
	ctrl "sigs.k8s.io/controller-runtime"
)

// Flights that fail together (status writes an API server was too busy
// for) retry apart: each after its backoff plus up to half of it again.
func TestFailedFlightsRetryJittered(t *testing.T) {
	retries := map[string]time.Duration{}
	f := NewFlights(func(name string, after time.Duration) { retries[name] = after })
	const flights = 50
	distinct := map[time.Duration]bool{}
	for i := range flights {
		name := string(rune('a' + i))
		f.land(logr.Discard(), name, ctrl.Result{}, errors.New("status write timed out"))
		after := retries[name]
		if after < FailureBackoffBase || after > FailureBackoffBase*3/2 {
			t.Errorf("flight %s retries after %s, want %s to %s", name, after, FailureBackoffBase, FailureBackoffBase*3/2)
		}
		distinct[after] = true
	}
	if len(distinct) < flights/2 {
		t.Errorf("%d flights failing together retry at %d distinct times", flights, len(distinct))
	}
}
