package pgstore

import (
	"fmt"
	"testing"
	"unsafe"
)

// TestInternerNeverReturnsAWrongValue checks that the interner returns a
// string equal to what it is given, shares equal strings, keeps copies
// rather than views of the driver's reused row buffers, and stays correct
// past its bound (where it starts afresh).
func TestInternerNeverReturnsAWrongValue(t *testing.T) {
	var in interner
	buf := []byte("prod")
	first := in.internBytes(buf)
	copy(buf, "test") // the driver reuses its buffer for the next row
	if first != "prod" {
		t.Fatalf("interned %q changed to %q with the buffer it was read from", "prod", first)
	}
	if got := in.internBytes(buf); got != "test" {
		t.Fatalf("internBytes(%q) = %q", buf, got)
	}
	if got := in.intern("prod"); got != "prod" || !sameString(got, first) {
		t.Fatalf("intern(%q) = %q, not the shared copy", "prod", got)
	}
	if got := in.internBytes([]byte("prod")); !sameString(got, first) {
		t.Fatalf("internBytes(%q) = %q, not the shared copy", "prod", got)
	}
	for i := range 3 * maxInterned {
		want := fmt.Sprint("value-", i%(maxInterned+7))
		var got string
		if i%2 == 0 {
			got = in.internBytes([]byte(want))
		} else {
			got = in.intern(want)
		}
		if got != want {
			t.Fatalf("call %d: got %q, want %q", i, got, want)
		}
	}
	if len(in.m) > maxInterned {
		t.Fatalf("interner holds %d strings, bound %d", len(in.m), maxInterned)
	}
}

// sameString reports whether a and b share their bytes.
func sameString(a, b string) bool {
	return len(a) == len(b) && unsafe.StringData(a) == unsafe.StringData(b)
}
