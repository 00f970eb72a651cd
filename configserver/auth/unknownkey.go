package auth

import (
	"context"
	"sync"
	"time"
)

// DefaultUnknownKeyRefresh is RemoteOptions.UnknownKeyRefresh when it is
// not set.
const DefaultUnknownKeyRefresh = 30 * time.Second

// UnknownKeyRefresher is implemented by key sources that read their keys
// again, between their scheduled refreshes, when a token names a key id the
// set lacks — an issuer that starts signing with a new key as soon as it
// publishes it — at most once per RemoteOptions.UnknownKeyRefresh however
// many such tokens arrive (a flood of made-up key ids costs one read per
// period). What is read is still only the configured file or URL.
type UnknownKeyRefresher interface {
	// RefreshForUnknownKey reads the keys again unless it did less than
	// the period ago, and reports whether the set now holds kid.
	RefreshForUnknownKey(ctx context.Context, kid string) bool
}

// unknownKeyLimiter lets one on-demand refresh through per period.
type unknownKeyLimiter struct {
	every time.Duration // negative: never
	now   func() time.Time

	mu   sync.Mutex
	last time.Time
}

func newUnknownKeyLimiter(o RemoteOptions) *unknownKeyLimiter {
	return &unknownKeyLimiter{every: o.UnknownKeyRefresh, now: o.Now}
}

// refresh reads the keys again (read) for kid unless set already holds it
// or a read ran less than the period ago, and reports whether set holds kid
// then. Calls are serialised, so that one arriving while a read is in
// flight waits for it and sees its keys.
func (l *unknownKeyLimiter) refresh(kid string, set func() *KeySet, read func()) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if hasKey(set(), kid) {
		return true
	}
	if l.every < 0 {
		return false
	}
	now := l.now()
	if !l.last.IsZero() && now.Sub(l.last) < l.every {
		return false
	}
	l.last = now
	read()
	return hasKey(set(), kid)
}

// hasKey reports whether set holds a key with id kid.
func hasKey(set *KeySet, kid string) bool {
	for _, k := range set.Keys {
		if k.ID == kid {
			return true
		}
	}
	return false
}
