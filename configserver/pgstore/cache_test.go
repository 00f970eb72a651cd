package pgstore

import (
	"fmt"
	"testing"
)

func TestByteCacheBound(t *testing.T) {
	c := newByteCache(100)
	for i := range 20 {
		c.put(fmt.Sprint(i), make([]byte, 10))
		if got := c.bytes(); got > 100 {
			t.Fatalf("after %d puts: got %d bytes cached, want at most 100", i+1, got)
		}
	}
	if _, ok := c.get("0"); ok {
		t.Fatal("oldest entry still cached, want it evicted")
	}
	if _, ok := c.get("19"); !ok {
		t.Fatal("newest entry not cached")
	}
	c.get("10")                    // touch: 10 becomes most recent
	c.put("big", make([]byte, 25)) // evicts the three least recently used: 11, 12, 13
	if _, ok := c.get("10"); !ok {
		t.Fatal("recently used entry evicted before older ones")
	}
	if _, ok := c.get("11"); ok {
		t.Fatal("least recently used entry still cached")
	}
	c.put("huge", make([]byte, 101))
	if _, ok := c.get("huge"); ok {
		t.Fatal("entry larger than the bound was cached")
	}
}
