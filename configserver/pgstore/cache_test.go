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
	n := 0
	for i := range 20 {
		if _, ok := c.get(fmt.Sprint(i)); ok {
			n++
		}
	}
	if n != 10 {
		t.Fatalf("got %d entries cached, want 10 (100 bytes of 10-byte entries)", n)
	}
	// Every cached entry is now referenced; touch them again except one
	// after a sweep clears the bits, so the untouched one goes first.
	c.put("a", make([]byte, 10)) // sweep: clears all bits, evicts one
	var kept []string
	for k := range c.items {
		kept = append(kept, k)
	}
	for _, k := range kept {
		if k != kept[0] {
			c.get(k)
		}
	}
	c.put("b", make([]byte, 10))
	if _, ok := c.items[kept[0]]; ok {
		t.Fatalf("entry %s unused since the sweep survived while used ones were at risk", kept[0])
	}
	for _, k := range kept[1:] {
		if _, ok := c.items[k]; !ok {
			t.Fatalf("recently used entry %s evicted before an unused one", k)
		}
	}
	c.put("huge", make([]byte, 101))
	if _, ok := c.get("huge"); ok {
		t.Fatal("entry larger than the bound was cached")
	}
	if got := c.bytes(); got > 100 {
		t.Fatalf("got %d bytes cached, want at most 100", got)
	}
}
