package eventually_test

import (
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/peppy-ratio/lbregistrar/test/eventually"
)

func TestPassesOnceCheckDoes(t *testing.T) {
	calls := 0
	eventually.Passes(t, time.Minute, time.Millisecond, func() error {
		if calls++; calls < 3 {
			return fmt.Errorf("call %d", calls)
		}
		return nil
	})
	if calls != 3 {
		t.Fatalf("check called %d times, want 3", calls)
	}
}

func TestFailsWithTheLastError(t *testing.T) {
	ft := &fatalRecorder{TB: t}
	calls := 0
	done := make(chan struct{})
	go func() {
		defer close(done)
		eventually.Passes(ft, 20*time.Millisecond, time.Millisecond, func() error {
			calls++
			return fmt.Errorf("call %d", calls)
		})
	}()
	<-done
	if want := fmt.Sprintf("gave up waiting after 20ms: call %d", calls); ft.fatal != want {
		t.Fatalf("failed with %q, want %q", ft.fatal, want)
	}
}

// fatalRecorder records what the test was failed with and ends the
// goroutine, as Fatalf does, without failing the real test.
type fatalRecorder struct {
	testing.TB
	fatal string
}

func (r *fatalRecorder) Fatalf(format string, args ...any) {
	r.fatal = fmt.Sprintf(format, args...)
	runtime.Goexit()
}
