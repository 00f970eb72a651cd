package pgstore

import (
	"sync"
	"sync/atomic"
)

// byteCache holds immutable artifact bytes keyed by digest, bounded by the
// total number of bytes it holds. A hit takes only a read lock and sets a
// reference bit; eviction is second-chance (CLOCK-like): an entry used
// since the last sweep is spared once. Hits therefore never serialise
// concurrent requests.
type byteCache struct {
	max int64

	mu    sync.RWMutex
	size  int64
	items map[string]*cacheItem
}

type cacheItem struct {
	bytes []byte
	ref   atomic.Bool
}

func newByteCache(max int64) *byteCache {
	return &byteCache{max: max, items: make(map[string]*cacheItem)}
}

func (c *byteCache) get(digest string) ([]byte, bool) {
	c.mu.RLock()
	it := c.items[digest]
	c.mu.RUnlock()
	if it == nil {
		return nil, false
	}
	if !it.ref.Load() {
		it.ref.Store(true)
	}
	return it.bytes, true
}

func (c *byteCache) put(digest string, b []byte) {
	n := int64(len(b))
	if n > c.max {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.items[digest]; ok {
		return
	}
	for c.size+n > c.max {
		c.evictOneLocked()
	}
	c.items[digest] = &cacheItem{bytes: b}
	c.size += n
}

// evictOneLocked removes one entry not referenced since the last sweep,
// clearing reference bits as it passes; the second pass always finds one.
func (c *byteCache) evictOneLocked() {
	for range 2 {
		for k, it := range c.items {
			if it.ref.Load() {
				it.ref.Store(false)
				continue
			}
			delete(c.items, k)
			c.size -= int64(len(it.bytes))
			return
		}
	}
}

func (c *byteCache) bytes() int64 {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.size
}
