// Package eventually is how the tests wait for something to happen: they
// check for the event itself, again and again, until it has happened or a
// deadline has passed, rather than sleeping for a time it usually takes.
// It depends on nothing but the standard library, so every test package
// can use it.
package eventually

import "time"

// T is what Passes needs of a test: a *testing.T or *testing.B, or a
// property-based test's own (rapid's *T).
type T interface {
	Helper()
	Fatalf(format string, args ...any)
}

// Passes calls check every interval until it returns nil. Once timeout has
// passed, it fails the test with the error check last returned, which
// should say what was awaited and what was seen instead. check runs on the
// caller's goroutine, so it may fail the test itself.
func Passes(t T, timeout, interval time.Duration, check func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		err := check()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("gave up waiting after %s: %v", timeout, err)
		}
		time.Sleep(interval)
	}
}
