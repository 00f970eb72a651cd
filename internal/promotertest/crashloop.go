package promotertest

import (
	"math/rand/v2"
	"testing"
	"time"
)

// CrashLoop is the schedule of a kill -9 loop: Runs runs (environment
// variable CONFIGPUB_CRASH_RUNS, else the default given to NewCrashLoop),
// kill moments drawn from a generator seeded with CONFIGPUB_CRASH_SEED
// (default 1), so a failing run can be replayed.
type CrashLoop struct {
	Runs int
	Seed uint64
	rng  *rand.Rand
}

// NewCrashLoop reads the loop's size and seed from the environment.
func NewCrashLoop(t testing.TB, defaultRuns int) *CrashLoop {
	t.Helper()
	seed := uint64(EnvInt(t, "CONFIGPUB_CRASH_SEED", 1))
	return &CrashLoop{
		Runs: EnvInt(t, "CONFIGPUB_CRASH_RUNS", defaultRuns),
		Seed: seed,
		rng:  rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)),
	}
}

// Kill chooses where run i kills a process that lives about life, of which
// phase after its marker line: every third run anywhere in its life (delay
// after start), the others within the phase (delay after the marker), the
// arguments of Process.KillAt.
func (c *CrashLoop) Kill(i int, life, phase time.Duration) (anywhere bool, delay time.Duration) {
	anywhere = i%3 == 0
	if anywhere {
		return true, time.Duration(c.rng.Int64N(int64(life)))
	}
	// Draw twice, as the loops always did, so seeds replay the same runs.
	_ = c.rng.Int64N(int64(life))
	return false, time.Duration(c.rng.Int64N(int64(phase)))
}
