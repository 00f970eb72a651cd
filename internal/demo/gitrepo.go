package demo

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"
)

// policyRepo is the demo's Git policy repository: main is the protected
// branch, changes arrive on feature branches and land through merge commits
// that carry a Reviewed-by trailer, as a pull-request merge does.
type policyRepo struct {
	dir  string
	repo *git.Repository
}

var (
	author   = object.Signature{Name: "Dana Developer", Email: "dana@example.com"}
	reviewer = "Riley Reviewer <riley@example.com>"
	merger   = object.Signature{Name: "Policy Bot", Email: "policy-bot@example.com"}
)

// newPolicyRepo initialises dir with a bootstrap commit on main.
func newPolicyRepo(dir string, now time.Time) (*policyRepo, error) {
	repo, err := git.PlainInitWithOptions(dir, &git.PlainInitOptions{
		InitOptions: git.InitOptions{DefaultBranch: plumbing.NewBranchReferenceName("main")},
	})
	if err != nil {
		return nil, fmt.Errorf("git init %s: %w", dir, err)
	}
	r := &policyRepo{dir: dir, repo: repo}
	readme := "# Policy repository\n\nPolicy sources for configpub. Change them by pull request;\n" +
		"`configpub compile` rewrites releases/<env>.yaml, which is reviewed with the change.\n"
	if err := os.WriteFile(filepath.Join(dir, "README.md"), []byte(readme), 0o644); err != nil {
		return nil, err
	}
	if _, err := r.commit("Bootstrap the policy repository", now); err != nil {
		return nil, err
	}
	return r, nil
}

// branch creates and checks out a feature branch from main.
func (r *policyRepo) branch(name string) error {
	wt, err := r.repo.Worktree()
	if err != nil {
		return err
	}
	main, err := r.repo.Reference(plumbing.NewBranchReferenceName("main"), true)
	if err != nil {
		return err
	}
	return wt.Checkout(&git.CheckoutOptions{Branch: plumbing.NewBranchReferenceName(name), Hash: main.Hash(), Create: true})
}

// copyTree writes every file of src into the working tree.
func (r *policyRepo) copyTree(src fs.FS) error {
	return fs.WalkDir(src, ".", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := fs.ReadFile(src, path)
		if err != nil {
			return err
		}
		dst := filepath.Join(r.dir, filepath.FromSlash(path))
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			return err
		}
		return os.WriteFile(dst, b, 0o644)
	})
}

// commit stages everything and commits it as the author.
func (r *policyRepo) commit(msg string, when time.Time) (plumbing.Hash, error) {
	wt, err := r.repo.Worktree()
	if err != nil {
		return plumbing.ZeroHash, err
	}
	if err := wt.AddWithOptions(&git.AddOptions{All: true}); err != nil {
		return plumbing.ZeroHash, fmt.Errorf("git add: %w", err)
	}
	sig := author
	sig.When = when
	h, err := wt.Commit(msg, &git.CommitOptions{Author: &sig, Committer: &sig})
	if err != nil {
		return plumbing.ZeroHash, fmt.Errorf("git commit: %w", err)
	}
	return h, nil
}

// merge lands branch on main with a merge commit (first parent main) whose
// message carries the reviewer's trailer, then checks out main.
func (r *policyRepo) merge(branch string, pr int, title string, when time.Time) (plumbing.Hash, error) {
	mainRef := plumbing.NewBranchReferenceName("main")
	main, err := r.repo.Reference(mainRef, true)
	if err != nil {
		return plumbing.ZeroHash, err
	}
	feat, err := r.repo.Reference(plumbing.NewBranchReferenceName(branch), true)
	if err != nil {
		return plumbing.ZeroHash, err
	}
	fc, err := r.repo.CommitObject(feat.Hash())
	if err != nil {
		return plumbing.ZeroHash, err
	}
	sig := merger
	sig.When = when
	c := &object.Commit{
		Author:       sig,
		Committer:    sig,
		Message:      fmt.Sprintf("%s (#%d)\n\nMerge branch '%s'\n\nReviewed-by: %s\n", title, pr, branch, reviewer),
		TreeHash:     fc.TreeHash, // main has not moved since the branch was cut
		ParentHashes: []plumbing.Hash{main.Hash(), feat.Hash()},
	}
	obj := r.repo.Storer.NewEncodedObject()
	if err := c.Encode(obj); err != nil {
		return plumbing.ZeroHash, err
	}
	h, err := r.repo.Storer.SetEncodedObject(obj)
	if err != nil {
		return plumbing.ZeroHash, err
	}
	if err := r.repo.Storer.SetReference(plumbing.NewHashReference(mainRef, h)); err != nil {
		return plumbing.ZeroHash, err
	}
	wt, err := r.repo.Worktree()
	if err != nil {
		return plumbing.ZeroHash, err
	}
	if err := wt.Checkout(&git.CheckoutOptions{Branch: mainRef, Force: true}); err != nil {
		return plumbing.ZeroHash, fmt.Errorf("git checkout main: %w", err)
	}
	return h, nil
}

// log returns main's first-parent history, newest first, one line each.
func (r *policyRepo) log(n int) ([]string, error) {
	ref, err := r.repo.Reference(plumbing.NewBranchReferenceName("main"), true)
	if err != nil {
		return nil, err
	}
	var out []string
	h := ref.Hash()
	for i := 0; i < n; i++ {
		c, err := r.repo.CommitObject(h)
		if err != nil {
			return nil, err
		}
		out = append(out, fmt.Sprintf("%s %s", h.String()[:10], firstLine(c.Message)))
		if len(c.ParentHashes) == 0 {
			break
		}
		h = c.ParentHashes[0]
	}
	return out, nil
}

func firstLine(s string) string {
	for i, ch := range s {
		if ch == '\n' {
			return s[:i]
		}
	}
	return s
}
