package review_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/go-git/go-git/v5/plumbing"

	"github.com/configpub/configpub/internal/gittest"
	"github.com/configpub/configpub/promote/review"
)

type history struct {
	repo                       *gittest.Repo
	keyA, keyB                 *gittest.Key
	root, feat, merge, direct  plumbing.Hash
	signedA, signedB, unmerged plumbing.Hash
}

// buildHistory makes:
//
//	main:    root ── merge(root, feat) ── direct ── signedA ── signedB
//	feature:   └── feat ──┘
//	wip:                                                     └── unmerged
func buildHistory(t *testing.T) *history {
	t.Helper()
	h := &history{repo: gittest.New(t), keyA: gittest.NewKey(t, "Alice", "alice@example.com"), keyB: gittest.NewKey(t, "Bob", "bob@example.com")}
	r := h.repo
	h.root = r.Commit(gittest.Commit{Files: map[string][]byte{"configpub.yaml": []byte("kind: Repository\n"), "releases/dev.yaml": []byte("releaseVersion: 0\n")}, Message: "initial"})
	h.feat = r.Commit(gittest.Commit{Branch: "feature", From: h.root, Files: map[string][]byte{"releases/dev.yaml": []byte("releaseVersion: 1\n")}, Message: "release 1", Trailers: []string{"Signed-off-by: Dev <dev@example.com>"}})
	h.merge = r.Merge("main", "feature", gittest.Commit{Message: "Merge pull request #1 from feature\n\nrelease 1", Trailers: []string{"Reviewed-by: Carol <carol@example.com>", "Approved-by: Dave <dave@example.com>", "Reviewed-by: Carol <carol@example.com>"}})
	h.direct = r.Commit(gittest.Commit{Files: map[string][]byte{"README.md": []byte("direct push\n")}, Message: "direct push without review"})
	h.signedA = r.Commit(gittest.Commit{Files: map[string][]byte{"README.md": []byte("signed by A\n")}, Message: "signed by alice", Trailers: []string{"Reviewed-by: Carol <carol@example.com>"}, SignWith: h.keyA})
	h.signedB = r.Commit(gittest.Commit{Files: map[string][]byte{"README.md": []byte("signed by B\n")}, Message: "signed by bob", SignWith: h.keyB})
	h.unmerged = r.Commit(gittest.Commit{Branch: "wip", From: h.signedB, Files: map[string][]byte{"README.md": []byte("wip\n")}, Message: "work in progress", Trailers: []string{"Reviewed-by: Mallory <m@example.com>"}, SignWith: h.keyA})
	return h
}

func TestCheck(t *testing.T) {
	h := buildHistory(t)
	tests := []struct {
		name          string
		opts          review.Options
		wantCommit    plumbing.Hash
		wantDepth     int
		wantReviewers []string
		wantSigned    bool
		wantErr       error // nil = reviewed
	}{
		{name: "tip by default", opts: review.Options{}, wantCommit: h.signedB, wantDepth: 0},
		{name: "short ref name", opts: review.Options{Ref: "main", Commit: h.direct.String()}, wantCommit: h.direct, wantDepth: 2},
		{name: "abbreviated hash", opts: review.Options{Commit: h.merge.String()[:10]}, wantCommit: h.merge, wantDepth: 3, wantReviewers: []string{"Carol <carol@example.com>", "Dave <dave@example.com>"}},
		{name: "root commit", opts: review.Options{Commit: h.root.String()}, wantCommit: h.root, wantDepth: 4},
		{name: "merge with required trailers", opts: review.Options{Commit: h.merge.String(), RequireTrailers: []string{"Reviewed-by", "approved-by"}}, wantCommit: h.merge, wantDepth: 3, wantReviewers: []string{"Carol <carol@example.com>", "Dave <dave@example.com>"}},
		{name: "second parent of a merge", opts: review.Options{Commit: h.feat.String()}, wantErr: review.ErrNotOnProtectedRef},
		{name: "commit only on a feature branch", opts: review.Options{Commit: h.unmerged.String()}, wantErr: review.ErrNotOnProtectedRef},
		{name: "beyond max depth", opts: review.Options{Commit: h.root.String(), MaxDepth: 3}, wantErr: review.ErrNotOnProtectedRef},
		{name: "feature commit on the feature ref itself", opts: review.Options{ProtectedRef: "refs/heads/feature", Commit: h.feat.String()}, wantCommit: h.feat, wantDepth: 0},
		{name: "caller names the configured ref", opts: review.Options{ProtectedRef: "feature", Ref: "refs/heads/feature", Commit: h.feat.String()}, wantCommit: h.feat, wantDepth: 0},
		{name: "caller cannot choose another ref", opts: review.Options{Ref: "refs/heads/feature", Commit: h.feat.String()}, wantErr: review.ErrNotProtectedRef},
		{name: "caller cannot leave the configured ref", opts: review.Options{ProtectedRef: "refs/heads/feature", Ref: "main"}, wantErr: review.ErrNotProtectedRef},
		{name: "missing trailer", opts: review.Options{Commit: h.direct.String(), RequireTrailers: []string{"Reviewed-by"}}, wantErr: review.ErrMissingTrailer},
		{name: "merge lacks a trailer only its parent has", opts: review.Options{Commit: h.merge.String(), RequireTrailers: []string{"Signed-off-by"}}, wantErr: review.ErrMissingTrailer},
		{name: "signed by trusted key", opts: review.Options{Commit: h.signedA.String(), RequireSignedBy: h.keyA.Armored, RequireTrailers: []string{"Reviewed-by"}}, wantCommit: h.signedA, wantDepth: 1, wantReviewers: []string{"Carol <carol@example.com>"}, wantSigned: true},
		{name: "unsigned commit", opts: review.Options{Commit: h.direct.String(), RequireSignedBy: h.keyA.Armored}, wantErr: review.ErrUnsigned},
		{name: "signed by untrusted key", opts: review.Options{RequireSignedBy: h.keyA.Armored}, wantErr: review.ErrUnsigned},
		{name: "trusted signature but not on the ref", opts: review.Options{Commit: h.unmerged.String(), RequireSignedBy: h.keyA.Armored, RequireTrailers: []string{"Reviewed-by"}}, wantErr: review.ErrNotOnProtectedRef},
		{name: "keyring with both keys", opts: review.Options{RequireSignedBy: h.keyA.Armored + h.keyB.Armored}, wantCommit: h.signedB, wantSigned: true},
		{name: "bad keyring", opts: review.Options{RequireSignedBy: "not a keyring"}, wantErr: review.ErrBadKeyring},
		{name: "unknown commit", opts: review.Options{Commit: strings.Repeat("ab", 20)}, wantErr: review.ErrNotFound},
		{name: "revision expression refused", opts: review.Options{Commit: "main~1"}, wantErr: review.ErrNotFound},
		{name: "unknown ref", opts: review.Options{ProtectedRef: "refs/heads/nope"}, wantErr: review.ErrNotFound},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := review.Check(context.Background(), h.repo.Git, tt.opts)
			if tt.wantErr != nil {
				if !errors.Is(err, tt.wantErr) {
					t.Fatalf("got error %v, want %v", err, tt.wantErr)
				}
				refusal := errors.Is(tt.wantErr, review.ErrNotOnProtectedRef) || errors.Is(tt.wantErr, review.ErrNotProtectedRef) || errors.Is(tt.wantErr, review.ErrMissingTrailer) || errors.Is(tt.wantErr, review.ErrUnsigned)
				var re *review.RefusalError
				if got, want := errors.As(err, &re), refusal; got != want {
					t.Fatalf("got *RefusalError %v, want %v (err %v)", got, want, err)
				}
				if refusal {
					if !errors.Is(err, review.ErrNotReviewed) {
						t.Errorf("got %v, want it to wrap ErrNotReviewed", err)
					}
					if re.Ref == "" || len(re.Commit) != 40 {
						t.Errorf("got refusal ref %q commit %q, want both set", re.Ref, re.Commit)
					}
				}
				return
			}
			if err != nil {
				t.Fatalf("got error %v, want reviewed", err)
			}
			if got.Commit != tt.wantCommit.String() {
				t.Errorf("got commit %s, want %s", got.Commit, tt.wantCommit)
			}
			if got.Depth != tt.wantDepth {
				t.Errorf("got depth %d, want %d", got.Depth, tt.wantDepth)
			}
			if !slices.Equal(got.Reviewers, tt.wantReviewers) {
				t.Errorf("got reviewers %q, want %q", got.Reviewers, tt.wantReviewers)
			}
			if (got.SignedBy != "") != tt.wantSigned {
				t.Errorf("got signedBy %q, want signed=%v", got.SignedBy, tt.wantSigned)
			}
			if got.Tip != h.repo.Tip(strings.TrimPrefix(review.RefName(tt.opts.ProtectedRef), "refs/heads/")).String() {
				t.Errorf("got tip %s, want the ref's tip", got.Tip)
			}
			if got.Author.Email != gittest.AuthorEmail || got.Time.IsZero() || got.Time.Location().String() != "UTC" {
				t.Errorf("got author %v time %v, want the fixed author and a UTC time", got.Author, got.Time)
			}
		})
	}
}

func TestCheckSubjectAndSigner(t *testing.T) {
	h := buildHistory(t)
	got, err := review.Check(context.Background(), h.repo.Git, review.Options{Commit: h.signedA.String(), RequireSignedBy: h.keyA.Armored + h.keyB.Armored})
	if err != nil {
		t.Fatal(err)
	}
	if got.Subject != "signed by alice" {
		t.Errorf("got subject %q, want %q", got.Subject, "signed by alice")
	}
	want := strings.ToUpper(strings.TrimSpace(fingerprint(h.keyA)))
	if got.SignedBy != want {
		t.Errorf("got signedBy %s, want %s (alice)", got.SignedBy, want)
	}
}

func TestCheckCanceled(t *testing.T) {
	h := buildHistory(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := review.Check(ctx, h.repo.Git, review.Options{Commit: h.root.String()})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("got %v, want context.Canceled", err)
	}
}

// TestCheckShallowHistory: when the walk reaches a commit the repository
// does not hold (a shallow clone), the answer is a clear error, not a
// refusal and not a pass.
func TestCheckShallowHistory(t *testing.T) {
	h := buildHistory(t)
	hex := h.direct.String()
	if err := os.Remove(filepath.Join(h.repo.Dir, ".git", "objects", hex[:2], hex[2:])); err != nil {
		t.Fatal(err)
	}
	if _, err := review.Check(context.Background(), h.repo.Git, review.Options{Commit: h.signedA.String()}); err != nil {
		t.Fatalf("got %v for a commit above the missing one, want reviewed", err)
	}
	_, err := review.Check(context.Background(), h.repo.Git, review.Options{Commit: h.root.String()})
	if !errors.Is(err, review.ErrIncompleteHistory) || errors.Is(err, review.ErrNotReviewed) {
		t.Fatalf("got %v, want ErrIncompleteHistory (not a refusal)", err)
	}
}

// TestMissingProtectedRefSaysWhereItComesFrom: in a repository made by a
// plain `git init` (branch master), the default protected ref is not
// found, and the error says where the ref comes from and which branches
// there are; naming master with --ref is the documented refusal (the
// caller cannot choose the ref), not the same "not found"; a revision name
// for --commit says a promotion names a commit by its hash.
func TestMissingProtectedRefSaysWhereItComesFrom(t *testing.T) {
	r := gittest.New(t)
	tip := r.Commit(gittest.Commit{Branch: "master", Files: map[string][]byte{"configpub.yaml": []byte("kind: Repository\n")}, Message: "initial"})
	_, err := review.Check(context.Background(), r.Git, review.Options{})
	if !errors.Is(err, review.ErrNotFound) || !strings.Contains(err.Error(), "CONFIGPUB_PROTECTED_REF") || !strings.Contains(err.Error(), "refs/heads/master") {
		t.Fatalf("default ref in a master-only repository: %v; want not found, naming CONFIGPUB_PROTECTED_REF and refs/heads/master", err)
	}
	_, err = review.Check(context.Background(), r.Git, review.Options{Ref: "refs/heads/master"})
	if !errors.Is(err, review.ErrNotProtectedRef) {
		t.Fatalf("--ref master with the default protected ref: %v; want the caller-cannot-choose refusal", err)
	}
	if _, err := review.Check(context.Background(), r.Git, review.Options{ProtectedRef: "master", Commit: tip.String()}); err != nil {
		t.Fatalf("with CONFIGPUB_PROTECTED_REF=master: %v", err)
	}
	_, err = review.Check(context.Background(), r.Git, review.Options{ProtectedRef: "master", Commit: "HEAD"})
	if !errors.Is(err, review.ErrNotFound) || !strings.Contains(err.Error(), "git rev-parse HEAD") {
		t.Fatalf("--commit HEAD: %v; want a refusal saying how to name the commit", err)
	}
}
