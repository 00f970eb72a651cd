package review

import (
	"errors"
	"fmt"

	git "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing/cache"

	"github.com/configpub/configpub/internal/gitfs"
)

// objectCacheSize bounds the decoded objects an opened repository keeps.
// A promotion reads each policy file's blob twice in a row (its size, then
// its bytes) and each directory's tree once, so a small cache serves it;
// go-git's default (96 MiB) holds most of a large repository's blobs for
// as long as the repository is open.
const objectCacheSize = 16 * cache.MiByte

// Open opens the Git repository at dir (a worktree, a linked worktree made
// by `git worktree add`, or a bare repository; parent directories are not
// searched), with the object cache bounded and the pack files it reads
// kept open (gitfs.Bounded).
func Open(dir string) (*git.Repository, error) {
	repo, err := git.PlainOpenWithOptions(dir, &git.PlainOpenOptions{EnableDotGitCommonDir: true})
	if err != nil {
		return nil, fmt.Errorf("open git repository %s: %w", dir, err)
	}
	if repo, err = gitfs.Bounded(repo, objectCacheSize); err != nil {
		return nil, fmt.Errorf("open git repository %s: %w", dir, err)
	}
	return repo, nil
}

// OpenPolicy opens the Git repository of the policy repository at dir, as
// Open, and returns the policy repository's directory in it (Options.Dir
// of a promotion): "" when dir is the repository (a worktree's root or a
// bare repository), else dir's path inside the working tree that contains
// it (a monorepo's policy/, as compile --repo takes it).
func OpenPolicy(dir string) (*git.Repository, string, error) {
	repo, err := Open(dir)
	if err == nil || !errors.Is(err, git.ErrRepositoryNotExists) {
		return repo, "", err
	}
	root, prefix, lerr := gitfs.Locate(dir)
	if lerr != nil {
		return nil, "", err
	}
	if repo, err = Open(root); err != nil {
		return nil, "", err
	}
	return repo, prefix, nil
}
