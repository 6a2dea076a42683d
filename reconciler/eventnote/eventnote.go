// Package eventnote keeps Events' notes within what the API server takes.
// A note longer than Limit is refused ("can have at most 1024
// characters", events.k8s.io/v1 validation NoteLengthLimit) and the
// recorder drops the Event without a retry, so nobody would see it; notes
// name what failed and why (OCI's answers, several nodes' errors), which can
// be longer.
package eventnote

import (
	"fmt"
	"unicode/utf8"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/events"
)

// Limit is the most bytes an Event's note may have.
const Limit = 1024

// Recorder records Events whose notes are cut to fit (Fit).
type Recorder struct{ events.EventRecorder }

// Eventf records the Event with its note cut to fit.
func (r Recorder) Eventf(regarding, related runtime.Object, eventtype, reason, action, note string, args ...any) {
	r.EventRecorder.Eventf(regarding, related, eventtype, reason, action, "%s", Fit(fmt.Sprintf(note, args...)))
}

// Fit is note cut to Limit bytes at a character's start, ending in an
// ellipsis, when it is longer.
func Fit(note string) string {
	if len(note) <= Limit {
		return note
	}
	const ellipsis = "…"
	cut := Limit - len(ellipsis)
	for cut > 0 && !utf8.RuneStart(note[cut]) {
		cut--
	}
	return note[:cut] + ellipsis
}
