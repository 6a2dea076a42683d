//go:build !linux

package scale

import "time"

// ThreadCPU is the CPU time the calling OS thread has used; here, not known.
func ThreadCPU() (time.Duration, bool) { return 0, false }
