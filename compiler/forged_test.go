package compiler_test

import (
	"bytes"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/configpub/configpub/compiler"
	"github.com/configpub/configpub/internal/forgery"
)

// TestForgedManifestIsStale: every hand-edited manifest of the forgery
// table — each envelope and version field of a target release 2 carried
// over unchanged, and the release-level fields — with its digests fixed to
// match, is STALE, although the sources are the ones it was compiled from.
// Compile writes nothing.
func TestForgedManifestIsStale(t *testing.T) {
	dir1 := copyRepo(t)
	h1 := newHistory(t, dir1)
	h1.compile(t, time.Time{})

	dir2 := copyRepo(t)
	h2 := newHistory(t, dir2)
	h2.compile(t, time.Time{})
	edit(t, filepath.Join(dir2, "agents/account.yaml"), "requestsPerMinute: 120", "requestsPerMinute: 150")
	h2.release(t, time.Date(2026, 8, 20, 0, 0, 0, 0, time.UTC))
	if res, err := h2.try(time.Time{}); err != nil || !res.UpToDate {
		t.Fatalf("release 2 as compiled is not up to date: %v %v", err, res.Stale())
	}

	for _, c := range forgery.Cases() {
		t.Run(c.Name, func(t *testing.T) {
			h, dir := h2, dir2
			if c.Release == 1 {
				h, dir = h1, dir1
			}
			orig := h.releases[c.Release]
			forged, err := forgery.Forge(c, orig)
			if err != nil {
				t.Fatal(err)
			}
			if bytes.Equal(forged, orig) {
				t.Fatal("the forgery changed nothing")
			}
			p := filepath.Join(dir, compiler.ManifestPath("dev"))
			writeFile(t, p, string(forged))
			defer writeFile(t, p, string(orig))
			res, err := h.try(time.Date(2026, 9, 1, 0, 0, 0, 0, time.UTC))
			if err == nil {
				err = res.Stale()
			}
			if !errors.Is(err, compiler.ErrStale) {
				t.Fatalf("got %v, want ErrStale", err)
			}
			t.Logf("%v", err)
			if got := readFile(t, p); got != string(forged) {
				t.Fatal("compile rewrote the manifest")
			}
		})
	}
}
