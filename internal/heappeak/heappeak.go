// Package heappeak measures, for benchmarks, how high the Go heap's object
// footprint (live objects and those not yet swept) rises while code runs.
// It reads runtime/metrics every 5 ms, which does not stop the world, so
// the peak it reports can miss a rise shorter than that.
package heappeak

import (
	"runtime"
	"runtime/metrics"
	"sync"
	"time"
)

const name = "/memory/classes/heap/objects:bytes"

// Sampler samples the heap's object footprint until Stop.
type Sampler struct {
	base uint64
	peak uint64
	stop chan struct{}
	wg   sync.WaitGroup
}

// read returns the heap's object footprint now.
func read() uint64 {
	s := []metrics.Sample{{Name: name}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

// Start collects garbage, records the footprint left as the base and
// starts sampling.
func Start() *Sampler {
	runtime.GC()
	s := &Sampler{base: read(), stop: make(chan struct{})}
	s.peak = s.base
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		t := time.NewTicker(5 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-s.stop:
				return
			case <-t.C:
				s.peak = max(s.peak, read())
			}
		}
	}()
	return s
}

// Stop stops sampling and returns the largest footprint seen and the base
// Start recorded, in bytes.
func (s *Sampler) Stop() (peak, base uint64) {
	close(s.stop)
	s.wg.Wait()
	return max(s.peak, read()), s.base
}

// Rise runs fn and returns how far the footprint rose above its level
// before fn, in bytes.
func Rise(fn func()) uint64 {
	s := Start()
	fn()
	peak, base := s.Stop()
	return peak - base
}
