package oci

import (
	"context"
	"testing"
	"time"
)

// A server's Retry-After is read as seconds and capped before it becomes a
// Duration: a day is an hour, a value that would overflow is an hour, and
// what is not a number of seconds (an HTTP date, NaN, a negative) is
// ignored.
func TestRetryAfterIsCapped(t *testing.T) {
	for value, want := range map[string]time.Duration{
		"2":                             2 * time.Second,
		" 0.5 ":                         500 * time.Millisecond,
		"86400":                         maxRetryAfter,
		"1e300":                         maxRetryAfter,
		"Inf":                           maxRetryAfter,
		"NaN":                           0,
		"-5":                            0,
		"Wed, 21 Oct 2015 07:28:00 GMT": 0,
		"":                              0,
	} {
		_, state := call(context.Background())
		state.setRetryAfter(value)
		if got := state.getRetryAfter(); got != want {
			t.Errorf("Retry-After %q = %s, want %s", value, got, want)
		}
	}
}
