package gitfs

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"path"
	"path/filepath"
	"strings"
	"sync"

	git "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing/format/gitignore"
	"github.com/go-git/go-git/v5/storage/filesystem"

	"github.com/configpub/configpub/internal/policytree"
)

// maxIgnoreFileBytes bounds one .gitignore or info/exclude file.
const maxIgnoreFileBytes = 1 << 20

// Ignored returns a function reporting whether Git ignores the file or
// directory p (slash-separated, relative to dir, a directory inside a Git
// working tree) and does not track it (nor, for a directory, anything in
// it): what `git status` leaves out and `git add` refuses, so a clean clone
// of the repository does not have it. The rules are the
// repository's: $GIT_DIR/info/exclude and every .gitignore from the
// worktree's root down to p's directory (the user's core.excludesFile is
// not read: it is not the repository's). A file in Git's index is tracked,
// whatever the patterns say, and so is a directory holding one. A .gitignore that is a symbolic link or not a
// regular file is not read, as Git does not read it.
func Ignored(dir string) (func(p string, isDir bool) bool, error) {
	r, prefix, err := openAt(dir)
	if err != nil {
		return nil, err
	}
	wt, err := r.Worktree()
	if err != nil {
		return nil, fmt.Errorf("worktree of %s: %w", dir, err)
	}
	ig := &ignored{repo: r, root: wt.Filesystem.Root(), prefix: prefix, dirs: map[string][]gitignore.Pattern{}}
	if st, ok := r.Storer.(*filesystem.Storage); ok {
		if f, err := st.Filesystem().Open("info/exclude"); err == nil {
			b, err := io.ReadAll(io.LimitReader(f, maxIgnoreFileBytes))
			f.Close()
			if err != nil {
				return nil, fmt.Errorf("read info/exclude of %s: %w", dir, err)
			}
			ig.exclude = parsePatterns(b, nil)
		}
	}
	return ig.match, nil
}

// ignored holds the patterns of the directories asked about, by path
// relative to the worktree root ("" for the root).
type ignored struct {
	repo    *git.Repository
	root    string
	prefix  string // the policy directory, relative to root
	exclude []gitignore.Pattern

	mu      sync.Mutex
	dirs    map[string][]gitignore.Pattern // every pattern that applies beneath a directory
	tracked map[string]bool                // the index's paths and their directories, read at the first ignored path
}

func (ig *ignored) match(p string, isDir bool) bool {
	ig.mu.Lock()
	defer ig.mu.Unlock()
	full := path.Join(ig.prefix, p)
	parts := strings.Split(full, "/")
	if !gitignore.NewMatcher(ig.patterns(path.Dir(full))).Match(parts, isDir) {
		return false
	}
	if ig.tracked == nil {
		// Every tracked path and every directory holding one.
		ig.tracked = map[string]bool{}
		if idx, err := ig.repo.Storer.Index(); err == nil {
			for _, e := range idx.Entries {
				for n := e.Name; n != "." && !ig.tracked[n]; n = path.Dir(n) {
					ig.tracked[n] = true
				}
			}
		}
	}
	return !ig.tracked[full]
}

// patterns returns every pattern applying to the entries of directory d
// (relative to the worktree root, "." for the root), in Git's order of
// priority: info/exclude, then each .gitignore from the root down.
func (ig *ignored) patterns(d string) []gitignore.Pattern {
	if d == "." {
		d = ""
	}
	if ps, ok := ig.dirs[d]; ok {
		return ps
	}
	var parent []gitignore.Pattern
	var domain []string
	if d == "" {
		parent = ig.exclude
	} else {
		parent = ig.patterns(path.Dir(d))
		domain = strings.Split(d, "/")
	}
	ps := parent
	// A .gitignore that cannot be read (a link, a FIFO, one too large)
	// ignores nothing.
	if b, err := policytree.ReadFile(filepath.Join(ig.root, filepath.FromSlash(d), ".gitignore"), maxIgnoreFileBytes); err == nil {
		ps = append(append([]gitignore.Pattern(nil), parent...), parsePatterns(b, domain)...)
	}
	ig.dirs[d] = ps
	return ps
}

// parsePatterns parses the lines of an ignore file of directory domain.
func parsePatterns(b []byte, domain []string) []gitignore.Pattern {
	var ps []gitignore.Pattern
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(nil, maxIgnoreFileBytes)
	for sc.Scan() {
		line := strings.TrimSuffix(sc.Text(), "\r")
		if strings.HasPrefix(line, "#") || strings.TrimSpace(line) == "" {
			continue
		}
		ps = append(ps, gitignore.ParsePattern(line, domain))
	}
	return ps
}
