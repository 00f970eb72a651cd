package heappeak_test

import (
	"testing"
	"time"

	"github.com/configpub/configpub/internal/heappeak"
)

var sink [][]byte

// TestRiseSeesWhatIsHeld: 64 MiB held for 50 ms are seen, and let go they
// do not count against the next measurement.
func TestRiseSeesWhatIsHeld(t *testing.T) {
	const size = 64 << 20
	rise := heappeak.Rise(func() {
		for range 64 {
			sink = append(sink, make([]byte, 1<<20))
		}
		time.Sleep(50 * time.Millisecond)
		sink = nil
	})
	if rise < size || rise > 2*size {
		t.Fatalf("rise %d MiB holding 64 MiB, want 64 to 128", rise>>20)
	}
	if again := heappeak.Rise(func() { time.Sleep(20 * time.Millisecond) }); again > 8<<20 {
		t.Fatalf("rise %d MiB holding nothing, want under 8", again>>20)
	}
}
