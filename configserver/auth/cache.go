package auth

import (
	"sync"
	"time"
)

// tokenCache remembers verified tokens, keyed by the raw token, so a
// workload polling with the same token costs a map lookup instead of a
// signature verification. An entry is only used while the key set that
// verified it is current, before the token's exp (no leeway) and after its
// nbf (with leeway). When full, expired entries are swept and, if that is
// not enough, an arbitrary eighth of the entries is dropped.
type tokenCache struct {
	max int

	mu      sync.RWMutex
	entries map[string]cacheEntry
}

type cacheEntry struct {
	claims     *Claims
	generation uint64
}

func newTokenCache(max int) *tokenCache {
	return &tokenCache{max: max, entries: make(map[string]cacheEntry, min(max, 1024))}
}

func (c *tokenCache) get(raw string, gen uint64, now time.Time, leeway time.Duration) (*Claims, bool) {
	c.mu.RLock()
	e, ok := c.entries[raw]
	c.mu.RUnlock()
	if !ok || e.generation != gen || !now.Before(e.claims.Expiry) {
		return nil, false
	}
	if !e.claims.NotBefore.IsZero() && now.Add(leeway).Before(e.claims.NotBefore) {
		return nil, false
	}
	return e.claims, true
}

func (c *tokenCache) put(raw string, cl *Claims, gen uint64, now time.Time) {
	if !now.Before(cl.Expiry) {
		return // verified within leeway only: never cached
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.entries) >= c.max {
		c.evictLocked(now)
	}
	c.entries[raw] = cacheEntry{claims: cl, generation: gen}
}

func (c *tokenCache) evictLocked(now time.Time) {
	for k, e := range c.entries {
		if !now.Before(e.claims.Expiry) {
			delete(c.entries, k)
		}
	}
	drop := len(c.entries) - c.max + max(c.max/8, 1)
	for k := range c.entries {
		if drop <= 0 {
			break
		}
		delete(c.entries, k)
		drop--
	}
}

func (c *tokenCache) len() int {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return len(c.entries)
}
