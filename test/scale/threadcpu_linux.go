package scale

import (
	"time"

	"golang.org/x/sys/unix"
)

// ThreadCPU is the CPU time the calling OS thread has used. Lock the
// goroutine to its thread (runtime.LockOSThread) around what it measures.
func ThreadCPU() (time.Duration, bool) {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts); err != nil {
		return 0, false
	}
	return time.Duration(ts.Nano()), true
}
