package pgstore

import (
	"container/list"
	"sync"
)

// byteCache is an LRU of immutable artifact bytes keyed by digest, bounded
// by the total number of bytes it holds.
type byteCache struct {
	max int64

	mu    sync.Mutex
	size  int64
	order *list.List // front = most recently used; values are *cacheItem
	items map[string]*list.Element
}

type cacheItem struct {
	digest string
	bytes  []byte
}

func newByteCache(max int64) *byteCache {
	return &byteCache{max: max, order: list.New(), items: make(map[string]*list.Element)}
}

func (c *byteCache) get(digest string) ([]byte, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	el, ok := c.items[digest]
	if !ok {
		return nil, false
	}
	c.order.MoveToFront(el)
	return el.Value.(*cacheItem).bytes, true
}

func (c *byteCache) put(digest string, b []byte) {
	n := int64(len(b))
	if n > c.max {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.items[digest]; ok {
		c.order.MoveToFront(el)
		return
	}
	for c.size+n > c.max {
		last := c.order.Back()
		it := last.Value.(*cacheItem)
		c.order.Remove(last)
		delete(c.items, it.digest)
		c.size -= int64(len(it.bytes))
	}
	c.items[digest] = c.order.PushFront(&cacheItem{digest: digest, bytes: b})
	c.size += n
}

func (c *byteCache) bytes() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.size
}
