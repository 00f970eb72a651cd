package main

import (
	"errors"
	"math"
	"runtime/debug"

	"github.com/KimMachineGun/automemlimit/memlimit"
)

// memoryLimitRatio is the share of a container's memory limit the Go
// runtime aims to stay under; the rest is headroom for memory the runtime
// does not account for (stacks in flight, the kernel's page tables, cgo).
const memoryLimitRatio = 0.9

// setMemoryLimit sets the Go runtime's soft memory limit to 90% of the
// memory limit that limit reports (main: the process's cgroup, that is a
// container's or a systemd unit's limit). The garbage collector then works
// harder as the heap nears the limit instead of letting the kernel kill the
// process: a compile of a large environment in a container of 1 GiB
// finishes, slower, instead of being OOM-killed. Without a limit it changes
// nothing. GOMEMLIMIT, when set, wins (AUTOMEMLIMIT=off turns this off,
// AUTOMEMLIMIT=0.8 changes the share). It returns the limit set, 0 when it
// set none.
func setMemoryLimit(limit memlimit.Provider) (int64, error) {
	n, err := memlimit.SetGoMemLimitWithOpts(memlimit.WithProvider(limit), memlimit.WithRatio(memoryLimitRatio))
	if errors.Is(err, memlimit.ErrNoCgroup) || errors.Is(err, memlimit.ErrCgroupsNotSupported) {
		return 0, nil
	}
	return n, err
}

// memoryLimit is the Go runtime's soft memory limit, 0 when there is none.
func memoryLimit() int64 {
	n := debug.SetMemoryLimit(-1)
	if n == math.MaxInt64 {
		return 0
	}
	return n
}
