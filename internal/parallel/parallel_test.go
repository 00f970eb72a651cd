package parallel

import (
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
)

// TestDoRunsEveryItemOnce: without failures every index runs exactly once.
func TestDoRunsEveryItemOnce(t *testing.T) {
	for _, n := range []int{0, 1, 2, 7, 1000} {
		counts := make([]int32, n)
		if err := Do(n, func(i int) error { atomic.AddInt32(&counts[i], 1); return nil }); err != nil {
			t.Fatalf("n=%d: %v", n, err)
		}
		for i, c := range counts {
			if c != 1 {
				t.Fatalf("n=%d: item %d ran %d times", n, i, c)
			}
		}
	}
}

// TestDoReturnsTheFirstFailureInOrder: whatever the scheduling, the error
// is the smallest failing index's.
func TestDoReturnsTheFirstFailureInOrder(t *testing.T) {
	for round := range 200 {
		fail := map[int]bool{37: true, 38: true, 90: true}
		err := Do(100, func(i int) error {
			if fail[i] {
				return fmt.Errorf("item %d", i)
			}
			return nil
		})
		if err == nil || err.Error() != "item 37" {
			t.Fatalf("round %d: %v, want item 37", round, err)
		}
	}
	if err := Do(3, func(i int) error { return errors.New("x") }); err == nil || err.Error() != "x" {
		t.Fatalf("%v", err)
	}
}
