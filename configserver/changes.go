package configserver

import (
	"sync"

	"github.com/configpub/configpub/bundle"
)

// Notifier is implemented by stores that can tell a waiting request when an
// identity's current answer may have changed (a pointer move, a lease
// renewal, a retirement or a revocation). The handler holds GET /configs
// requests with wait= only over a Store that implements it; over any other
// Store wait= is ignored and the answer is immediate.
type Notifier interface {
	// Subscribe arranges for fn to be called once, on a goroutine of the
	// notifier's, when id's current answer may differ from any answer
	// Current gives after the call; fn must not block. Subscribe before
	// calling Current, so that no change can fall in between. cancel
	// removes the subscription and reports whether fn will not be called.
	Subscribe(id bundle.Identity, fn func()) (cancel func() bool)
}

// Changes is a per-identity change broadcaster a Store embeds to implement
// Notifier. A subscription is a map entry: no goroutine and no channel per
// waiter. The zero value is ready to use.
type Changes struct {
	mu   sync.Mutex
	subs map[bundle.Identity]map[*subscription]struct{}
}

type subscription struct{ fn func() }

var _ Notifier = (*Changes)(nil)

// Subscribe implements Notifier.
func (c *Changes) Subscribe(id bundle.Identity, fn func()) (cancel func() bool) {
	s := &subscription{fn: fn}
	c.mu.Lock()
	if c.subs == nil {
		c.subs = make(map[bundle.Identity]map[*subscription]struct{})
	}
	set := c.subs[id]
	if set == nil {
		set = make(map[*subscription]struct{}, 1)
		c.subs[id] = set
	}
	set[s] = struct{}{}
	c.mu.Unlock()
	return func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		set := c.subs[id]
		if _, ok := set[s]; !ok {
			return false
		}
		delete(set, s)
		if len(set) == 0 {
			delete(c.subs, id)
		}
		return true
	}
}

// Notify calls, once each, the subscribers of the identities ids. Call it
// after the change is visible to Current.
func (c *Changes) Notify(ids ...bundle.Identity) {
	var fns []func()
	c.mu.Lock()
	for _, id := range ids {
		for s := range c.subs[id] {
			fns = append(fns, s.fn)
		}
		delete(c.subs, id)
	}
	c.mu.Unlock()
	for _, fn := range fns {
		fn()
	}
}

// Waiting reports how many subscriptions are pending.
func (c *Changes) Waiting() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, set := range c.subs {
		n += len(set)
	}
	return n
}
