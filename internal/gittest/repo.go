package gittest

import (
	"fmt"
	"io/fs"
	"os"
	"path"
	"sort"
	"strings"
	"testing"
	"time"

	git "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"
)

// Fixed identity and clock of every commit made here.
const (
	AuthorName  = "Configpub Test"
	AuthorEmail = "test@configpub.dev"
	// Main is the default branch.
	Main = "main"
)

// Epoch is the time of the first commit; commit n is made at Epoch + n minutes.
var Epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// Repo is a repository under construction.
type Repo struct {
	t   testing.TB
	Dir string          // worktree directory (the repository is Dir/.git)
	Git *git.Repository // the go-git handle
	n   int             // commits made so far: the clock
}

// New creates an empty repository with HEAD -> refs/heads/main in t.TempDir().
func New(t testing.TB) *Repo {
	t.Helper()
	dir := t.TempDir()
	repo, err := git.PlainInitWithOptions(dir, &git.PlainInitOptions{
		InitOptions: git.InitOptions{DefaultBranch: plumbing.NewBranchReferenceName(Main)},
	})
	if err != nil {
		t.Fatalf("gittest: init %s: %v", dir, err)
	}
	return &Repo{t: t, Dir: dir, Git: repo}
}

// FromDir creates a repository whose first commit on main holds every file
// under dir (directories named .git are skipped), with the given message.
func FromDir(t testing.TB, dir, message string) *Repo {
	t.Helper()
	r := New(t)
	r.Commit(Commit{Files: ReadDir(t, dir), Message: message})
	return r
}

// ReadDir returns every regular file under dir, keyed by slash path.
func ReadDir(t testing.TB, dir string) map[string][]byte {
	t.Helper()
	files := map[string][]byte{}
	fsys := os.DirFS(dir)
	err := fs.WalkDir(fsys, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && d.Name() == ".git" {
			return fs.SkipDir
		}
		if !d.Type().IsRegular() {
			return nil
		}
		b, err := fs.ReadFile(fsys, p)
		files[p] = b
		return err
	})
	if err != nil {
		t.Fatalf("gittest: read fixture %s: %v", dir, err)
	}
	return files
}

// Commit describes a commit to make.
type Commit struct {
	// Branch receives the commit (short name). Default main. A branch that does
	// not exist yet starts at From (or is an orphan when From is zero).
	Branch string
	// From is the parent when Branch does not exist yet.
	From plumbing.Hash
	// Files overlays the parent's tree: a nil value deletes the path.
	Files map[string][]byte
	// Message is the commit message (subject, optional body). Default "change".
	Message string
	// Trailers are appended as the last paragraph, e.g. "Reviewed-by: A <a@x>".
	Trailers []string
	// Author overrides the fixed author (its When is ignored: the clock decides).
	Author *object.Signature
	// Committer overrides the fixed committer (its When is ignored), e.g.
	// WebFlowCommitter for what GitHub's merge button writes.
	Committer *object.Signature
	// SignWith signs the commit with this key (see NewKey).
	SignWith *Key
}

// WebFlowCommitter is the committer of the merge, squash and rebase commits
// GitHub makes from its web interface; it signs them with its web-flow key.
var WebFlowCommitter = object.Signature{Name: "GitHub", Email: "noreply@github.com"}

// Commit makes c on its branch and returns the new commit hash.
func (r *Repo) Commit(c Commit) plumbing.Hash {
	r.t.Helper()
	branch := c.Branch
	if branch == "" {
		branch = Main
	}
	var parents []plumbing.Hash
	if tip, ok := r.tip(branch); ok {
		parents = []plumbing.Hash{tip}
	} else if !c.From.IsZero() {
		parents = []plumbing.Hash{c.From}
	}
	return r.commit(branch, parents, c)
}

// Branch points the branch name at commit from (creating or moving it).
func (r *Repo) Branch(name string, from plumbing.Hash) {
	r.t.Helper()
	ref := plumbing.NewHashReference(plumbing.NewBranchReferenceName(name), from)
	if err := r.Git.Storer.SetReference(ref); err != nil {
		r.t.Fatalf("gittest: set branch %s: %v", name, err)
	}
}

// Merge makes a merge commit on into with parents [tip(into), tip(from)]
// (first parent = into, as a "merge pull request" button does). Its tree is
// the tree of from's tip overlaid with c.Files: the feature branch is
// expected to be up to date with into. c.Branch and c.From are ignored.
func (r *Repo) Merge(into, from string, c Commit) plumbing.Hash {
	r.t.Helper()
	a, ok := r.tip(into)
	if !ok {
		r.t.Fatalf("gittest: merge into missing branch %s", into)
	}
	b, ok := r.tip(from)
	if !ok {
		r.t.Fatalf("gittest: merge from missing branch %s", from)
	}
	if c.Message == "" {
		c.Message = "Merge branch '" + from + "' into " + into
	}
	return r.commitTree(into, []plumbing.Hash{a, b}, b, c)
}

// Tip returns the commit a branch points at.
func (r *Repo) Tip(branch string) plumbing.Hash {
	r.t.Helper()
	h, ok := r.tip(branch)
	if !ok {
		r.t.Fatalf("gittest: branch %s does not exist", branch)
	}
	return h
}

// Checkout force-checks out main into the worktree (for tools that read Dir).
func (r *Repo) Checkout() {
	r.t.Helper()
	wt, err := r.Git.Worktree()
	if err != nil {
		r.t.Fatalf("gittest: worktree: %v", err)
	}
	if err := wt.Checkout(&git.CheckoutOptions{Branch: plumbing.NewBranchReferenceName(Main), Force: true}); err != nil {
		r.t.Fatalf("gittest: checkout %s: %v", Main, err)
	}
}

// Files returns every file of commit h, keyed by slash path.
func (r *Repo) Files(h plumbing.Hash) map[string][]byte {
	r.t.Helper()
	files, err := r.files(h)
	if err != nil {
		r.t.Fatalf("gittest: %v", err)
	}
	return files
}

func (r *Repo) tip(branch string) (plumbing.Hash, bool) {
	ref, err := r.Git.Storer.Reference(plumbing.NewBranchReferenceName(branch))
	if err != nil {
		return plumbing.ZeroHash, false
	}
	return ref.Hash(), true
}

func (r *Repo) commit(branch string, parents []plumbing.Hash, c Commit) plumbing.Hash {
	base := plumbing.ZeroHash
	if len(parents) > 0 {
		base = parents[0]
	}
	return r.commitTree(branch, parents, base, c)
}

// commitTree writes a commit whose tree is base's tree overlaid with c.Files.
func (r *Repo) commitTree(branch string, parents []plumbing.Hash, base plumbing.Hash, c Commit) plumbing.Hash {
	r.t.Helper()
	files := map[string][]byte{}
	if !base.IsZero() {
		var err error
		if files, err = r.files(base); err != nil {
			r.t.Fatalf("gittest: %v", err)
		}
	}
	for p, b := range c.Files {
		if b == nil {
			delete(files, p)
			continue
		}
		files[p] = b
	}
	tree, err := writeTree(r.Git, files)
	if err != nil {
		r.t.Fatalf("gittest: write tree: %v", err)
	}
	when := Epoch.Add(time.Duration(r.n) * time.Minute)
	r.n++
	author := object.Signature{Name: AuthorName, Email: AuthorEmail}
	if c.Author != nil {
		author = *c.Author
	}
	author.When = when
	committer := object.Signature{Name: AuthorName, Email: AuthorEmail}
	if c.Committer != nil {
		committer = *c.Committer
	}
	committer.When = when
	commit := &object.Commit{
		Author:       author,
		Committer:    committer,
		Message:      message(c.Message, c.Trailers),
		TreeHash:     tree,
		ParentHashes: parents,
	}
	if c.SignWith != nil {
		sig, err := c.SignWith.sign(commit)
		if err != nil {
			r.t.Fatalf("gittest: sign commit: %v", err)
		}
		commit.PGPSignature = sig
	}
	h, err := store(r.Git, commit)
	if err != nil {
		r.t.Fatalf("gittest: write commit: %v", err)
	}
	r.Branch(branch, h)
	return h
}

func message(msg string, trailers []string) string {
	if msg == "" {
		msg = "change"
	}
	msg = strings.TrimRight(msg, "\n") + "\n"
	if len(trailers) > 0 {
		msg += "\n" + strings.Join(trailers, "\n") + "\n"
	}
	return msg
}

func (r *Repo) files(h plumbing.Hash) (map[string][]byte, error) {
	c, err := r.Git.CommitObject(h)
	if err != nil {
		return nil, fmt.Errorf("read commit %s: %w", h, err)
	}
	tree, err := c.Tree()
	if err != nil {
		return nil, fmt.Errorf("read tree of %s: %w", h, err)
	}
	files := map[string][]byte{}
	err = tree.Files().ForEach(func(f *object.File) error {
		s, err := f.Contents()
		files[f.Name] = []byte(s)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("read files of %s: %w", h, err)
	}
	return files, nil
}

type encoder interface {
	Encode(plumbing.EncodedObject) error
}

func store(repo *git.Repository, o encoder) (plumbing.Hash, error) {
	obj := repo.Storer.NewEncodedObject()
	if err := o.Encode(obj); err != nil {
		return plumbing.ZeroHash, err
	}
	return repo.Storer.SetEncodedObject(obj)
}

// writeTree writes the blobs and trees for files and returns the root tree.
func writeTree(repo *git.Repository, files map[string][]byte) (plumbing.Hash, error) {
	var entries []object.TreeEntry
	subdirs := map[string]map[string][]byte{}
	for p, b := range files {
		if dir, rest, ok := strings.Cut(p, "/"); ok {
			if subdirs[dir] == nil {
				subdirs[dir] = map[string][]byte{}
			}
			subdirs[dir][rest] = b
			continue
		}
		obj := repo.Storer.NewEncodedObject()
		obj.SetType(plumbing.BlobObject)
		w, err := obj.Writer()
		if err != nil {
			return plumbing.ZeroHash, err
		}
		if _, err := w.Write(b); err != nil {
			return plumbing.ZeroHash, err
		}
		if err := w.Close(); err != nil {
			return plumbing.ZeroHash, err
		}
		h, err := repo.Storer.SetEncodedObject(obj)
		if err != nil {
			return plumbing.ZeroHash, fmt.Errorf("write blob %s: %w", p, err)
		}
		entries = append(entries, object.TreeEntry{Name: path.Base(p), Mode: filemode.Regular, Hash: h})
	}
	for dir, sub := range subdirs {
		h, err := writeTree(repo, sub)
		if err != nil {
			return plumbing.ZeroHash, err
		}
		entries = append(entries, object.TreeEntry{Name: dir, Mode: filemode.Dir, Hash: h})
	}
	sort.Sort(object.TreeEntrySorter(entries))
	return store(repo, &object.Tree{Entries: entries})
}
