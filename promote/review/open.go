package review

import (
	"fmt"

	"github.com/go-git/go-billy/v5"
	git "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing/cache"
	"github.com/go-git/go-git/v5/storage/filesystem"
)

// objectCacheSize bounds the decoded objects an opened repository keeps.
// A promotion reads each policy file's blob twice in a row (its size, then
// its bytes) and each directory's tree once, so a small cache serves it;
// go-git's default (96 MiB) holds most of a large repository's blobs for
// as long as the repository is open.
const objectCacheSize = 16 * cache.MiByte

// maxOpenPacks is how many pack files an opened repository keeps open,
// with their parsed indexes. Without it go-git opens a pack file again for
// every object it reads from it: twice per policy file of a promotion.
// The last ones opened stay open until the repository is collected.
const maxOpenPacks = 8

// Open opens the Git repository at dir (a worktree or a bare repository;
// parent directories are not searched).
func Open(dir string) (*git.Repository, error) {
	repo, err := git.PlainOpen(dir)
	if err != nil {
		return nil, fmt.Errorf("open git repository %s: %w", dir, err)
	}
	st, ok := repo.Storer.(*filesystem.Storage)
	if !ok {
		return repo, nil
	}
	var wt billy.Filesystem // nil for a bare repository
	if w, err := repo.Worktree(); err == nil {
		wt = w.Filesystem
	}
	s := filesystem.NewStorageWithOptions(st.Filesystem(), cache.NewObjectLRU(objectCacheSize),
		filesystem.Options{MaxOpenDescriptors: maxOpenPacks})
	repo, err = git.Open(s, wt)
	if err != nil {
		return nil, fmt.Errorf("open git repository %s: %w", dir, err)
	}
	return repo, nil
}
