// Package gitfs reads a policy repository from Git with go-git: the commit
// time of HEAD (the default createdAt of a new release) and an
// io/fs view of the tree of any revision (the base of `configpub plan`).
//
// Tree is the module's one fs.FS view of a commit tree (lazy; the promoter's
// review reads reviewed commits through it too); TreeFS finds the repository
// that contains a directory, resolves a revision name and narrows the view to
// that directory.
package gitfs

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"strings"
	"time"

	"github.com/go-git/go-billy/v5"
	git "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/cache"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/storage/filesystem"
)

// ErrNotRepository: dir is not inside a Git working tree.
var ErrNotRepository = errors.New("not a git repository")

// open opens the repository that contains dir. In a linked worktree (made
// by `git worktree add`: its .git is a file naming
// $GIT_DIR/worktrees/NAME) HEAD is the worktree's own and the objects and
// refs are the main repository's, read through its commondir.
func open(dir string) (*git.Repository, error) {
	r, err := git.PlainOpenWithOptions(dir, &git.PlainOpenOptions{DetectDotGit: true, EnableDotGitCommonDir: true})
	if errors.Is(err, git.ErrRepositoryNotExists) {
		return nil, fmt.Errorf("open %s: %w", dir, ErrNotRepository)
	}
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", dir, err)
	}
	return r, nil
}

// treeCacheSize bounds go-git's object cache (96 MiB by default) in a
// repository opened to read a tree's files (a release's, or a policy
// tree's sources): each file is read once a pass, and a reader holding the
// repository open would otherwise hold up to 96 MiB of them a second time
// in the cache.
const treeCacheSize = 8 * cache.MiByte

// maxOpenPacks is how many pack files a repository opened by Bounded keeps
// open, with their parsed indexes.
const maxOpenPacks = 8

// Bounded returns repo opened again over the same storage and worktree
// with an object cache of cacheSize bytes (go-git's default, 96 MiB, keeps
// that much of what a reader reads a second time, for as long as the
// repository is open) and at most 8 pack files held open: without that
// bound go-git opens a pack file again for every object it reads from it,
// which was half the time of reading every file of a large tree. A
// repository not stored on a filesystem is returned as it is.
func Bounded(repo *git.Repository, cacheSize cache.FileSize) (*git.Repository, error) {
	st, ok := repo.Storer.(*filesystem.Storage)
	if !ok {
		return repo, nil
	}
	var wt billy.Filesystem // nil for a bare repository
	if w, err := repo.Worktree(); err == nil {
		wt = w.Filesystem
	}
	s := filesystem.NewStorageWithOptions(st.Filesystem(), cache.NewObjectLRU(cacheSize),
		filesystem.Options{MaxOpenDescriptors: maxOpenPacks})
	return git.Open(s, wt)
}

// openSmallCache is open, Bounded to an object cache of size bytes.
func openSmallCache(dir string, size cache.FileSize) (*git.Repository, error) {
	r, err := open(dir)
	if err != nil {
		return nil, err
	}
	if r, err = Bounded(r, size); err != nil {
		return nil, fmt.Errorf("open %s: %w", dir, err)
	}
	return r, nil
}

// HeadCommitTime returns the committer time of HEAD of the repository that
// contains dir, in UTC.
func HeadCommitTime(dir string) (time.Time, error) {
	r, err := open(dir)
	if err != nil {
		return time.Time{}, err
	}
	c, err := commit(r, "HEAD")
	if err != nil {
		return time.Time{}, err
	}
	return c.Committer.When.UTC(), nil
}

// commit resolves rev (anything go-git's ResolveRevision accepts: HEAD, a
// branch or tag name, a full or abbreviated hash, "main~1") to its commit.
func commit(r *git.Repository, rev string) (*object.Commit, error) {
	h, err := r.ResolveRevision(plumbing.Revision(rev))
	if errors.Is(err, io.EOF) {
		// go-git's answer to "main~5" on a history of fewer commits.
		return nil, fmt.Errorf("resolve %s: %w: the history ends before it", rev, plumbing.ErrReferenceNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("resolve %s: %w", rev, err)
	}
	c, err := r.CommitObject(*h)
	if err != nil {
		return nil, fmt.Errorf("commit %s: %w", rev, err)
	}
	return c, nil
}

// TreeFS returns the files of dir (a directory inside a Git working tree) as
// they are at revision rev, as an fs.FS rooted at dir (see Tree:
// files are read lazily, symbolic links and submodules are listed but refuse
// Open). When dir does not exist at rev the FS is empty.
func TreeFS(dir, rev string) (fs.FS, error) {
	r, prefix, err := openAt(dir)
	if err != nil {
		return nil, err
	}
	c, err := commit(r, rev)
	if err != nil {
		return nil, err
	}
	return subTree(c, prefix, rev)
}

// subTree returns the files of directory prefix ("" for the root) of
// commit c (rev names it in messages) as an fs.FS rooted there, empty when
// c has no such directory.
func subTree(c *object.Commit, prefix, rev string) (fs.FS, error) {
	fsys, err := Tree(c)
	if err != nil {
		return nil, fmt.Errorf("tree at %s: %w", rev, err)
	}
	if prefix == "" {
		return fsys, nil
	}
	fi, err := fs.Stat(fsys, prefix)
	if errors.Is(err, fs.ErrNotExist) || (err == nil && !fi.IsDir()) {
		return emptyFS{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("tree %s at %s: %w", prefix, rev, err)
	}
	sub, err := fs.Sub(fsys, prefix)
	if err != nil {
		return nil, fmt.Errorf("tree %s at %s: %w", prefix, rev, err)
	}
	return sub, nil
}

// openAt opens the repository that contains dir, with an object cache of
// treeCacheSize, and returns dir's path relative to the worktree root (""
// for the root).
func openAt(dir string) (*git.Repository, string, error) {
	r, err := openSmallCache(dir, treeCacheSize)
	if err != nil {
		return nil, "", err
	}
	wt, err := r.Worktree()
	if err != nil {
		return nil, "", fmt.Errorf("worktree of %s: %w", dir, err)
	}
	prefix, err := relPath(wt.Filesystem.Root(), dir)
	if err != nil {
		return nil, "", err
	}
	return r, prefix, nil
}

// relPath returns dir relative to the worktree root, slash-separated; "" when
// dir is the root.
func relPath(root, dir string) (string, error) {
	root = strings.TrimSuffix(path.Clean(filepathToSlash(absPath(root))), "/")
	d := path.Clean(filepathToSlash(absPath(dir)))
	if d == root {
		return "", nil
	}
	if !strings.HasPrefix(d, root+"/") {
		return "", fmt.Errorf("%s is not inside %s", dir, root)
	}
	return strings.TrimPrefix(d, root+"/"), nil
}

// ErrNotContained: a revision's commit is not in the history of another.
var ErrNotContained = errors.New("not in the history")

// Contains returns nil when the commit base names is rev's commit or one of
// its ancestors (along any parent), and otherwise an error wrapping
// ErrNotContained that names both commits: rev does not hold everything
// base holds. dir is a directory inside the Git working tree.
func Contains(dir, rev, base string) error {
	r, err := open(dir)
	if err != nil {
		return err
	}
	top, err := commit(r, rev)
	if err != nil {
		return err
	}
	b, err := commit(r, base)
	if err != nil {
		return err
	}
	if b.Hash == top.Hash {
		return nil
	}
	ok, err := b.IsAncestor(top)
	if err != nil {
		return fmt.Errorf("is %s in the history of %s: %w", base, rev, err)
	}
	if !ok {
		return fmt.Errorf("%s (%s) is %w of %s (%s)", base, b.Hash.String()[:12], ErrNotContained, rev, top.Hash.String()[:12])
	}
	return nil
}

// Locate returns the root of the Git working tree that contains dir and
// dir's path relative to it, slash-separated ("" when dir is the root): a
// policy repository in a subdirectory of a monorepo is read from its
// Git repository at that path.
func Locate(dir string) (root, prefix string, err error) {
	r, err := open(dir)
	if err != nil {
		return "", "", err
	}
	wt, err := r.Worktree()
	if err != nil {
		return "", "", fmt.Errorf("worktree of %s: %w", dir, err)
	}
	root = wt.Filesystem.Root()
	if prefix, err = relPath(root, dir); err != nil {
		return "", "", err
	}
	return root, prefix, nil
}
