package pgstore

import (
	"time"

	"github.com/configpub/configpub/bundle"
)

// leaseIndex keeps, per environment, the servable current pointers that
// carry a lease end in a min-heap on that end, so that a /metrics scrape
// reads each environment's earliest lease end in O(environments) instead
// of walking every pointer under the store's lock. It is changed where
// the pointers are (install, applyBatch: O(log n) per pointer under the
// write lock) or built whole beside a full load (reconcile: outside the
// lock, swapped in with the pointers). Only the listener goroutine changes
// it or the entries' slots; Stats reads the heaps' tops under the read
// lock.
type leaseIndex struct {
	envs map[string]*leaseHeap
}

// leaseItem is one indexed pointer: its lease end in Unix nanoseconds.
type leaseItem struct {
	end int64
	e   *entry
}

// leaseHeap is one environment's indexed pointers, earliest end first (a
// binary min-heap). Each entry's slot is its position + 1 (0: not in a
// heap). Written out rather than through container/heap, whose interface
// boxes every pushed item: a renewal of every pointer replaces each in
// place and moves it once.
type leaseHeap []leaseItem

// set puts it at position i and records the position in its entry.
func (h leaseHeap) set(i int, it leaseItem) {
	h[i] = it
	it.e.slot = int32(i + 1)
}

// fix restores the heap order after the item at i changed.
func (h leaseHeap) fix(i int) {
	it := h[i]
	for i > 0 {
		p := (i - 1) / 2
		if h[p].end <= it.end {
			break
		}
		h.set(i, h[p])
		i = p
	}
	h.set(i, it)
	h.down(i)
}

// down moves the item at i down until neither child ends earlier.
func (h leaseHeap) down(i int) {
	it := h[i]
	for {
		c := 2*i + 1
		if c >= len(h) {
			break
		}
		if r := c + 1; r < len(h) && h[r].end < h[c].end {
			c = r
		}
		if it.end <= h[c].end {
			break
		}
		h.set(i, h[c])
		i = c
	}
	h.set(i, it)
}

// leaseEnd is the lease end e is indexed by (Unix nanoseconds), or 0 when
// e is not indexed: retired, unservable, or without a readable ExpiresAt.
func leaseEnd(e *entry) int64 {
	if e == nil || !e.servable() {
		return 0
	}
	if end := e.d.LeaseEnd(); !end.IsZero() {
		return end.UnixNano()
	}
	return 0
}

// buildLeaseIndex indexes every entry of pointers (a full load not yet
// current: no other index holds a slot the build overwrites that is
// still read).
func buildLeaseIndex(pointers map[bundle.Identity]*entry) leaseIndex {
	idx := leaseIndex{envs: make(map[string]*leaseHeap)}
	for id, e := range pointers {
		e.slot = 0
		end := leaseEnd(e)
		if end == 0 {
			continue
		}
		h := idx.envs[id.EnvTag]
		if h == nil {
			h = &leaseHeap{}
			idx.envs[id.EnvTag] = h
		}
		*h = append(*h, leaseItem{end: end, e: e})
	}
	for _, h := range idx.envs {
		for i := range *h {
			(*h)[i].e.slot = int32(i + 1)
		}
		for i := len(*h)/2 - 1; i >= 0; i-- { // heapify: O(n)
			h.down(i)
		}
	}
	return idx
}

// replace records that the pointer old (nil: none) of environment env was
// replaced by e (nil: removed): e takes old's place in the heap and moves
// once, O(log n). Called with the store's write lock held.
func (x *leaseIndex) replace(env string, old, e *entry) {
	end := leaseEnd(e)
	h := x.envs[env]
	i := -1 // old's position
	if old != nil && old.slot > 0 {
		if h != nil && int(old.slot) <= len(*h) && (*h)[old.slot-1].e == old {
			i = int(old.slot - 1)
		}
		old.slot = 0
	}
	switch {
	case i >= 0 && end != 0:
		(*h)[i] = leaseItem{end: end, e: e}
		h.fix(i)
	case i >= 0:
		last := len(*h) - 1
		(*h)[i] = (*h)[last]
		(*h)[last] = leaseItem{}
		*h = (*h)[:last]
		if i < last {
			h.fix(i)
		}
		if last == 0 {
			delete(x.envs, env)
		}
	case end != 0:
		if x.envs == nil {
			x.envs = make(map[string]*leaseHeap)
		}
		if h == nil {
			h = &leaseHeap{}
			x.envs[env] = h
		}
		*h = append(*h, leaseItem{end: end, e: e})
		h.fix(len(*h) - 1)
	}
}

// earliest returns each environment's earliest lease end: O(environments).
func (x *leaseIndex) earliest() map[string]time.Time {
	ends := make(map[string]time.Time, len(x.envs))
	for env, h := range x.envs {
		ends[env] = time.Unix(0, (*h)[0].end).UTC()
	}
	return ends
}
