package compiler_test

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/configpub/configpub/compiler"
)

// interruptedAfter is a context that reports itself cancelled after its
// first n Err calls: a fake for an interruption (SIGINT) that lands between
// two files of a release's write, which a real signal cannot be timed to.
type interruptedAfter struct {
	context.Context
	n atomic.Int32
}

func (c *interruptedAfter) Err() error {
	if c.n.Add(-1) < 0 {
		return context.Canceled
	}
	return nil
}

// TestInterruptedReleaseWriteIsWholeOrNothing: a compile interrupted
// before the release's first file is written writes none of it; one
// interrupted once its files are being written writes them all, so the
// release is the one before or the new one, which compile --check finds up
// to date — never new shards under the old root. The write stopped between
// two shards.
func TestInterruptedReleaseWriteIsWholeOrNothing(t *testing.T) {
	dir := benchRepo(t, 5)
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	res, err := compiler.Compile(context.Background(), os.DirFS(dir), compiler.Options{EnvTag: "bench", CreatedAt: at})
	if err != nil {
		t.Fatal(err)
	}

	before := &interruptedAfter{Context: context.Background()}
	if err := compiler.Write(before, res, dir, ""); !errors.Is(err, context.Canceled) {
		t.Fatalf("interrupted before writing: %v, want context.Canceled", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "releases")); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("interrupted before writing: releases/ written (%v), want nothing", err)
	}

	midway := &interruptedAfter{Context: context.Background()}
	midway.n.Store(1) // the check before the first file passes
	if err := compiler.Write(midway, res, dir, ""); err != nil {
		t.Fatalf("interrupted once writing: %v, want the release written whole", err)
	}
	if files := releaseFiles(t, dir); len(files) != 6 {
		t.Fatalf("interrupted once writing: %d release files, want the root and 5 shards", len(files))
	}
	check, err := compiler.Compile(context.Background(), os.DirFS(dir), compiler.Options{EnvTag: "bench", CheckOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := check.Stale(); err != nil {
		t.Fatalf("the release written once interrupted is not whole: %v", err)
	}
}
