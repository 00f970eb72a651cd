// Package parallel runs the items of a list on a bounded pool of
// goroutines with a sequential loop's outcome: the same results, and on
// failure the error of the first item in order that failed.
package parallel

import (
	"runtime"
	"sync"
)

// Do runs fn(0..n-1) on up to GOMAXPROCS goroutines. Each fn writes
// only its own slot of a caller's slice, so results do not depend on
// scheduling. On failure it returns the error of the smallest index, which
// is the one a sequential loop would have returned: indexes are handed out in
// order, so every smaller index has been started and is allowed to finish.
func Do(n int, fn func(i int) error) error {
	workers := runtime.GOMAXPROCS(0)
	if workers > n {
		workers = n
	}
	if workers <= 1 {
		for i := 0; i < n; i++ {
			if err := fn(i); err != nil {
				return err
			}
		}
		return nil
	}
	var (
		mu     sync.Mutex
		next   int
		errIdx = n
		first  error
		wg     sync.WaitGroup
	)
	take := func() (int, bool) {
		mu.Lock()
		defer mu.Unlock()
		if next >= n || next > errIdx {
			return 0, false
		}
		i := next
		next++
		return i, true
	}
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i, ok := take()
				if !ok {
					return
				}
				if err := fn(i); err != nil {
					mu.Lock()
					if i < errIdx {
						errIdx, first = i, err
					}
					mu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	return first
}
