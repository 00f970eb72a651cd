//go:build unix

package client_test

import (
	"syscall"
	"time"
)

// cpuTime returns the process's user+system CPU time: unlike wall time it
// does not grow while goroutines wait for a core on a busy machine.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
