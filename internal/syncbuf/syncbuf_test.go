package syncbuf

import (
	"fmt"
	"strings"
	"sync"
	"testing"
)

// Concurrent writers and readers (run with -race): every write lands whole.
func TestConcurrentWrites(t *testing.T) {
	var b Buffer
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range 100 {
				fmt.Fprintf(&b, "w%d-%d\n", i, j)
				_ = b.String()
			}
		}()
	}
	wg.Wait()
	if n := strings.Count(b.String(), "\n"); n != 800 {
		t.Fatalf("%d lines, want 800", n)
	}
	got := b.Bytes()
	got[0] = 'x'
	if b.String()[0] == 'x' {
		t.Fatal("Bytes shares the buffer's memory")
	}
}
