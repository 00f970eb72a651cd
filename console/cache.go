package console

import (
	"sync"
	"time"
)

// pageCache keeps computed page data until the store changes: any change
// notice (NOTIFY) invalidates every entry, and an entry is at most ttl old
// (runtime evidence arrives without a notice).
type pageCache struct {
	ttl time.Duration // <= 0: no caching
	now func() time.Time

	mu      sync.Mutex
	gen     uint64
	entries map[string]cacheEntry
}

type cacheEntry struct {
	gen uint64
	at  time.Time
	val any
}

// maxCacheEntries bounds the cache; past it, it starts over.
const maxCacheEntries = 1024

func newPageCache(ttl time.Duration, now func() time.Time) *pageCache {
	return &pageCache{ttl: ttl, now: now, entries: map[string]cacheEntry{}}
}

// invalidate drops every entry (a change notice arrived).
func (c *pageCache) invalidate() {
	c.mu.Lock()
	c.gen++
	c.entries = map[string]cacheEntry{}
	c.mu.Unlock()
}

// get returns the cached value of key or computes it with load. Errors are
// not cached.
func (c *pageCache) get(key string, load func() (any, error)) (any, error) {
	if c.ttl <= 0 {
		return load()
	}
	c.mu.Lock()
	e, ok := c.entries[key]
	gen := c.gen
	c.mu.Unlock()
	if ok && e.gen == gen && time.Since(e.at) < c.ttl {
		return e.val, nil
	}
	v, err := load()
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	if c.gen == gen {
		if len(c.entries) >= maxCacheEntries {
			c.entries = map[string]cacheEntry{}
		}
		c.entries[key] = cacheEntry{gen: gen, at: time.Now(), val: v}
	}
	c.mu.Unlock()
	return v, nil
}
