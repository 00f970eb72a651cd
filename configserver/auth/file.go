package auth

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

// FileKeys is a KeySource that reads a key file (a JWKS document or PEM
// public keys) and reads it again every interval, so that a key rotated in
// the file — a Kubernetes ConfigMap or Secret updated in place, a file an
// agent rewrites — is used without a restart. A file that cannot be read or
// parsed keeps the last good set (and is reported); only a successful read
// of different content replaces it, which invalidates cached tokens.
type FileKeys struct {
	path     string
	interval time.Duration
	logger   *slog.Logger
	unknown  *unknownKeyLimiter

	set atomic.Pointer[KeySet]

	mu   sync.Mutex // serialises reloads
	data []byte     // the content the current set was parsed from
	gen  uint64

	stats refreshStats
}

// NewFileKeys reads path now; it fails when the file holds no usable key.
// opts.Interval (default 5 minutes), opts.Logger, opts.UnknownKeyRefresh
// (a token naming a key id the set lacks reads the file again, at most once
// per period) and opts.Now apply; the HTTP fields of opts do not.
func NewFileKeys(path string, opts RemoteOptions) (*FileKeys, error) {
	opts = opts.withDefaults()
	f := &FileKeys{path: path, interval: opts.Interval, logger: opts.Logger, unknown: newUnknownKeyLimiter(opts)}
	if _, err := f.Reload(); err != nil {
		return nil, err
	}
	return f, nil
}

// KeySet returns the set read last.
func (f *FileKeys) KeySet() *KeySet { return f.set.Load() }

var _ UnknownKeyRefresher = (*FileKeys)(nil)

// RefreshForUnknownKey implements UnknownKeyRefresher.
func (f *FileKeys) RefreshForUnknownKey(_ context.Context, kid string) bool {
	return f.unknown.refresh(kid, f.KeySet, func() { f.reload("a token named an unknown key id") })
}

// RefreshStats reports when the file was last read successfully (changed
// or not) and how many reads failed.
func (f *FileKeys) RefreshStats() (lastSuccess time.Time, failures uint64) { return f.stats.get() }

// Reload reads the file again. It reports whether the set changed; an
// unchanged file changes nothing, and an error keeps the current set.
func (f *FileKeys) Reload() (changed bool, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	defer func() { f.stats.record(err) }()
	data, err := os.ReadFile(f.path)
	if err != nil {
		return false, fmt.Errorf("read key file: %w", err)
	}
	if f.gen > 0 && bytes.Equal(data, f.data) {
		return false, nil
	}
	keys, err := ParseKeys(f.path, data)
	if err != nil {
		return false, err
	}
	f.gen++
	f.data = data
	f.set.Store(&KeySet{Keys: keys, Generation: f.gen})
	return true, nil
}

// Run reloads the file every interval until ctx ends, logging each change
// (the key ids, never key material) and each failure, which keeps the last
// good set. It returns ctx's error.
func (f *FileKeys) Run(ctx context.Context) error {
	t := time.NewTicker(f.interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
			f.reload("scheduled")
		}
	}
}

// reload is Reload, logging a change (the key ids, never key material) and
// a failure, which keeps the last good set; why says what prompted it.
func (f *FileKeys) reload(why string) {
	changed, err := f.Reload()
	switch {
	case err != nil:
		f.logger.Warn("token key file not reloaded; the previous keys stay in use", "path", f.path, "reason", why, "err", err)
	case changed:
		f.logger.Info("token key file reloaded", "path", f.path, "reason", why, "keys", keyIDs(f.KeySet().Keys))
	}
}

func keyIDs(keys []Key) []string {
	ids := make([]string, len(keys))
	for i, k := range keys {
		ids[i] = k.ID
	}
	return ids
}

// refreshStats counts the refreshes of a key source.
type refreshStats struct {
	lastSuccess atomic.Int64 // Unix nanoseconds
	failures    atomic.Uint64
}

func (r *refreshStats) record(err error) {
	if err != nil {
		r.failures.Add(1)
		return
	}
	r.lastSuccess.Store(time.Now().UnixNano())
}

func (r *refreshStats) get() (time.Time, uint64) {
	var last time.Time
	if ns := r.lastSuccess.Load(); ns != 0 {
		last = time.Unix(0, ns)
	}
	return last, r.failures.Load()
}

// RefreshReporter is a key source that reads its keys again on a schedule
// (FileKeys, RemoteKeys): when it last succeeded and how often it failed.
type RefreshReporter interface {
	RefreshStats() (lastSuccess time.Time, failures uint64)
}

var (
	_ RefreshReporter = (*FileKeys)(nil)
	_ RefreshReporter = (*RemoteKeys)(nil)
)
