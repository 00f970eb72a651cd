package main

import (
	"errors"
	"fmt"
	"io"

	"github.com/configpub/configpub/compiler"
	"github.com/configpub/configpub/internal/gitfs"
)

// gitIgnored returns what Git ignores and does not track in the policy
// repository repo (gitfs.Ignored), or nil outside a Git repository: a
// release is compiled from what is committed, and a clean clone (CI's
// compile --check, promote) has no ignored file.
func gitIgnored(repo string) (func(string, bool) bool, error) {
	ig, err := gitfs.Ignored(repo)
	if errors.Is(err, gitfs.ErrNotRepository) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read what Git ignores: %w", err)
	}
	return ig, nil
}

// warnIgnored names the source files Git ignores, which were not compiled.
func warnIgnored(w io.Writer, files []string) {
	if len(files) > 0 {
		fmt.Fprintf(w, "warning: %s\n", compiler.IgnoredNote(files))
	}
}
