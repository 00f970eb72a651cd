package review

import (
	"errors"
	"fmt"
	"io/fs"
	"path"
	"strings"
	"time"

	git "github.com/go-git/go-git/v5"

	"github.com/configpub/configpub/internal/gitfs"
)

// CommitFS returns a read-only fs.FS view of the tree of commit (full or
// abbreviated hex), plus the commit's committer time in UTC, without touching
// any worktree. Every file reports that time as its ModTime. Regular and
// executable files can be opened; symbolic links and submodules are listed
// but refuse Open. The FS is safe for concurrent use.
func CommitFS(repo *git.Repository, commit string) (fs.FS, time.Time, error) {
	return CommitDirFS(repo, commit, "")
}

// CommitDirFS is CommitFS rooted at directory dir of the commit's tree
// (slash-separated, "" or "." for the root: where the policy repository
// lives in a monorepo). A commit without that directory is an error
// wrapping ErrNotFound that names it.
func CommitDirFS(repo *git.Repository, commit, dir string) (fs.FS, time.Time, error) {
	h, err := ResolveCommit(repo, commit)
	if err != nil {
		return nil, time.Time{}, err
	}
	c, err := repo.CommitObject(h)
	if err != nil {
		return nil, time.Time{}, fmt.Errorf("read commit %s: %w: %v", h, ErrNotFound, err)
	}
	fsys, err := gitfs.Tree(c)
	if err != nil {
		return nil, time.Time{}, err
	}
	if dir = CleanDir(dir); dir != "" {
		fi, err := fs.Stat(fsys, dir)
		switch {
		case errors.Is(err, fs.ErrNotExist) || (err == nil && !fi.IsDir()):
			return nil, time.Time{}, fmt.Errorf("commit %s has no directory %s/ (the policy repository's directory): %w", h.String()[:12], dir, ErrNotFound)
		case err != nil:
			return nil, time.Time{}, fmt.Errorf("directory %s/ at %s: %w", dir, h.String()[:12], err)
		}
		if fsys, err = fs.Sub(fsys, dir); err != nil {
			return nil, time.Time{}, fmt.Errorf("directory %s/ at %s: %w", dir, h.String()[:12], err)
		}
	}
	return fsys, c.Committer.When.UTC(), nil
}

// CleanDir returns dir, a directory of a Git tree, as gitfs and
// CommitDirFS take it: slash-separated, without a leading "./" or a
// trailing "/", "" for the root.
func CleanDir(dir string) string {
	dir = path.Clean(strings.ReplaceAll(dir, `\`, "/"))
	if dir == "." || dir == "/" {
		return ""
	}
	return dir
}
