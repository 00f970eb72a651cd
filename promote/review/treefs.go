package review

import (
	"fmt"
	"io/fs"
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
	return fsys, c.Committer.When.UTC(), nil
}
