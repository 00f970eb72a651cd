package simclock_test

import (
	"testing"
	"time"

	"github.com/configpub/configpub/internal/simclock"
)

func TestSetAndAdvance(t *testing.T) {
	t0 := time.Date(2026, 8, 13, 14, 0, 0, 0, time.UTC)
	c := simclock.New(t0)
	if got := c.Now(); !got.Equal(t0) {
		t.Fatalf("got %s, want %s", got, t0)
	}
	c.Advance(90 * 24 * time.Hour)
	if got, want := c.Now(), t0.Add(90*24*time.Hour); !got.Equal(want) {
		t.Fatalf("after Advance: got %s, want %s", got, want)
	}
	c.Set(t0.Add(-time.Minute))
	if got, want := c.Now(), t0.Add(-time.Minute); !got.Equal(want) {
		t.Fatalf("after Set: got %s, want %s", got, want)
	}
}
