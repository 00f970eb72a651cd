package benchsize

import (
	"flag"
	"strconv"
	"testing"
)

// TestFlag: without -short the flag's value; under -short the small size,
// unless the flag was given.
func TestFlag(t *testing.T) {
	given := flag.Int("benchsize.given", 10, "")
	unset := flag.Int("benchsize.unset", 10, "")
	if err := flag.Set("benchsize.given", "7"); err != nil {
		t.Fatal(err)
	}
	was := testing.Short()
	t.Cleanup(func() { _ = flag.Set("test.short", strconv.FormatBool(was)) })
	for _, c := range []struct {
		short        bool
		given, unset int
	}{{false, 7, 10}, {true, 7, 1}} {
		if err := flag.Set("test.short", strconv.FormatBool(c.short)); err != nil {
			t.Fatal(err)
		}
		if got := Flag("benchsize.given", given, 1); got != c.given {
			t.Errorf("short %v, flag given: got %d, want %d", c.short, got, c.given)
		}
		if got := Flag("benchsize.unset", unset, 1); got != c.unset {
			t.Errorf("short %v, flag not given: got %d, want %d", c.short, got, c.unset)
		}
	}
}
