package review

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	git "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"
)

// DefaultRef is the protected ref used when Options.ProtectedRef is empty.
const DefaultRef = "refs/heads/main"

// DefaultReviewerTrailers are the trailers whose values name reviewers when
// Options.ReviewerTrailers is nil.
var defaultReviewerTrailers = []string{"Reviewed-by", "Approved-by"}

// Options configures Check. The zero value checks the tip of refs/heads/main
// for first-parent membership only.
type Options struct {
	// ProtectedRef is the ref whose first-parent history holds reviewed
	// commits. It is the promoter's configuration (configpub promote reads
	// CONFIGPUB_PROTECTED_REF), not the caller's choice. Default DefaultRef.
	// A name without a "refs/" prefix is taken as a branch name ("main" ->
	// "refs/heads/main").
	ProtectedRef string
	// Ref is the ref the caller asks for. When set it must name ProtectedRef
	// (else a *RefusalError wrapping ErrNotProtectedRef): a caller cannot make
	// another branch count as reviewed.
	Ref string
	// Commit is the commit to check, full or abbreviated hex (at least 4
	// digits). Default: the tip of Ref.
	Commit string
	// RequireSignedBy is an armored OpenPGP keyring (one or several
	// concatenated armored public-key blocks); when set, the commit must carry
	// a valid signature by a key in it. Default: no signature required.
	RequireSignedBy string
	// RequireTrailers lists trailer names (e.g. "Reviewed-by") that must be
	// present with a non-empty value in the commit message; names compare
	// case-insensitively. For a merge commit the merge commit's own message counts.
	RequireTrailers []string
	// ReviewerTrailers names the trailers whose values are reported as
	// Review.Reviewers. Default: Reviewed-by, Approved-by.
	ReviewerTrailers []string
	// MaxDepth bounds the first-parent walk from the tip (0 = unbounded).
	MaxDepth int
}

// Actor is a commit author or committer.
type Actor struct {
	Name  string    `json:"name"`
	Email string    `json:"email"`
	When  time.Time `json:"when"`
}

// String formats the actor as Git does: "Name <email>".
func (a Actor) String() string { return a.Name + " <" + a.Email + ">" }

// Review is the evidence that a commit may be promoted.
type Review struct {
	Commit    string    `json:"commit"`             // full hex commit hash
	Ref       string    `json:"ref"`                // protected ref the commit was found on
	Tip       string    `json:"tip"`                // tip of Ref at the time of the check
	Depth     int       `json:"depth"`              // first-parent distance from Tip (0 = the tip itself)
	Subject   string    `json:"subject"`            // first line of the commit message
	Author    Actor     `json:"author"`             // commit author
	Committer Actor     `json:"committer"`          // commit committer
	Reviewers []string  `json:"reviewers"`          // values of the reviewer trailers, in message order, deduplicated
	Trailers  []Trailer `json:"trailers"`           // every trailer of the commit message
	SignedBy  string    `json:"signedBy,omitempty"` // upper-case hex fingerprint of the verifying key; empty when not required
	Time      time.Time `json:"time"`               // committer time (UTC)
}

// Check decides whether the commit in opts is reviewed. A refusal is a
// *RefusalError; any other error (unknown revision, bad keyring, storage
// failure) is returned wrapped with context.
func Check(ctx context.Context, repo *git.Repository, opts Options) (*Review, error) {
	ref := RefName(opts.ProtectedRef)
	var keyring string
	if opts.RequireSignedBy != "" {
		var err error
		if keyring, err = normalizeKeyring(opts.RequireSignedBy); err != nil {
			return nil, err
		}
	}
	otherRef := func(commit string) error {
		return &RefusalError{Commit: commit, Ref: ref, Err: ErrNotProtectedRef,
			Reason: fmt.Sprintf("ref %s is not the protected ref %s the promoter is configured with (CONFIGPUB_PROTECTED_REF); the caller cannot choose another", RefName(opts.Ref), ref)}
	}
	tipRef, err := repo.Reference(plumbing.ReferenceName(ref), true)
	if err != nil {
		if opts.Ref != "" && RefName(opts.Ref) != ref {
			return nil, otherRef(opts.Commit)
		}
		return nil, fmt.Errorf("resolve protected ref %s: %w: %v%s", ref, ErrNotFound, err, branchesHint(repo, ref))
	}
	tip := tipRef.Hash()
	target := tip
	if opts.Commit != "" {
		target, err = ResolveCommit(repo, opts.Commit)
		if err != nil {
			return nil, err
		}
	}
	commit, err := repo.CommitObject(target)
	if err != nil {
		return nil, fmt.Errorf("read commit %s: %w: %v", target, ErrNotFound, err)
	}
	if opts.Ref != "" && RefName(opts.Ref) != ref {
		return nil, otherRef(target.String())
	}
	depth, err := firstParentDepth(ctx, repo, tip, target, opts.MaxDepth)
	if err != nil {
		var re *RefusalError
		if errors.As(err, &re) {
			re.Ref = ref
		}
		return nil, err
	}
	trailers := ParseTrailers(commit.Message)
	refuse := func(reason string, sentinel error) error {
		return &RefusalError{Commit: target.String(), Ref: ref, Reason: reason, Err: sentinel}
	}
	for _, name := range opts.RequireTrailers {
		if len(TrailerValues(trailers, name)) == 0 {
			return nil, refuse(fmt.Sprintf("trailer %q missing from the commit message", name), ErrMissingTrailer)
		}
	}
	var signedBy string
	if keyring != "" {
		if strings.TrimSpace(commit.PGPSignature) == "" {
			return nil, refuse("commit is not signed", ErrUnsigned)
		}
		entity, err := commit.Verify(keyring)
		if err != nil {
			return nil, refuse("signature does not verify against the trusted keyring: "+err.Error(), ErrUnsigned)
		}
		signedBy = strings.ToUpper(fmt.Sprintf("%x", entity.PrimaryKey.Fingerprint))
	}
	names := opts.ReviewerTrailers
	if names == nil {
		names = defaultReviewerTrailers
	}
	return &Review{
		Commit:    target.String(),
		Ref:       ref,
		Tip:       tip.String(),
		Depth:     depth,
		Subject:   Subject(commit.Message),
		Author:    actor(commit.Author),
		Committer: actor(commit.Committer),
		Reviewers: reviewers(trailers, names),
		Trailers:  trailers,
		SignedBy:  signedBy,
		Time:      commit.Committer.When.UTC(),
	}, nil
}

// branchesHint says, for a protected ref the repository lacks, where the
// ref comes from and which branches the repository has (a repository
// created by a plain git init has master, not main).
func branchesHint(repo *git.Repository, ref string) string {
	var names []string
	if iter, err := repo.Branches(); err == nil {
		_ = iter.ForEach(func(r *plumbing.Reference) error {
			if len(names) < 8 {
				names = append(names, r.Name().String())
			}
			return nil
		})
	}
	has := "no branches"
	if len(names) > 0 {
		has = "the branches " + strings.Join(names, ", ")
	}
	return fmt.Sprintf(" (the protected ref is the promoter's configuration: CONFIGPUB_PROTECTED_REF, default %s; this repository has %s: "+
		"set CONFIGPUB_PROTECTED_REF, or name the branch %s)", DefaultRef, has, strings.TrimPrefix(ref, "refs/heads/"))
}

// RefName normalises a protected ref: "" -> DefaultRef, "main" -> "refs/heads/main".
func RefName(ref string) string {
	switch {
	case ref == "":
		return DefaultRef
	case strings.HasPrefix(ref, "refs/"):
		return ref
	default:
		return "refs/heads/" + ref
	}
}

// ResolveCommit resolves a full or abbreviated (at least 4 hex digits)
// commit hash. Names such as "main~1" are refused: a promotion names a commit.
func ResolveCommit(repo *git.Repository, sha string) (plumbing.Hash, error) {
	if len(sha) < 4 || len(sha) > 64 || strings.Trim(strings.ToLower(sha), "0123456789abcdef") != "" {
		return plumbing.ZeroHash, fmt.Errorf("commit %q: want 4 to 40 hex digits — a promotion names a commit by its hash, not a branch or revision name (git rev-parse %s): %w",
			sha, sha, ErrNotFound)
	}
	h, err := repo.ResolveRevision(plumbing.Revision(strings.ToLower(sha)))
	if err != nil {
		return plumbing.ZeroHash, fmt.Errorf("resolve commit %s: %w: %v", sha, ErrNotFound, err)
	}
	return *h, nil
}

// firstParentDepth walks the first-parent chain from tip and returns the
// distance to target, or a *RefusalError when target is not on it.
func firstParentDepth(ctx context.Context, repo *git.Repository, tip, target plumbing.Hash, maxDepth int) (int, error) {
	h := tip
	for depth := 0; ; depth++ {
		if h == target {
			return depth, nil
		}
		if maxDepth > 0 && depth >= maxDepth {
			break
		}
		if err := ctx.Err(); err != nil {
			return 0, fmt.Errorf("walk first-parent history: %w", err)
		}
		c, err := repo.CommitObject(h)
		if errors.Is(err, plumbing.ErrObjectNotFound) {
			return 0, fmt.Errorf("walk first-parent history: commit %s is missing (%d commits below the tip): %w: the history is incomplete — a shallow clone? fetch the full history (git fetch --unshallow, or fetch-depth: 0)", h, depth, ErrIncompleteHistory)
		}
		if err != nil {
			return 0, fmt.Errorf("walk first-parent history: read commit %s: %w", h, err)
		}
		if len(c.ParentHashes) == 0 {
			break
		}
		h = c.ParentHashes[0]
	}
	reason := "commit is not on the first-parent history of the protected ref (a feature-branch commit or a merged-in parent is never promoted)"
	if maxDepth > 0 {
		reason = fmt.Sprintf("commit is not within %d first-parent commits of the protected ref", maxDepth)
	}
	return 0, &RefusalError{Commit: target.String(), Reason: reason, Err: ErrNotOnProtectedRef}
}

// Subject returns the first line of a commit message.
func Subject(message string) string {
	s, _, _ := strings.Cut(strings.TrimLeft(message, "\n"), "\n")
	return strings.TrimSpace(s)
}

func actor(s object.Signature) Actor {
	return Actor{Name: s.Name, Email: s.Email, When: s.When.UTC()}
}

func reviewers(trailers []Trailer, names []string) []string {
	var out []string
	seen := map[string]bool{}
	for _, t := range trailers {
		for _, n := range names {
			if strings.EqualFold(t.Key, n) && t.Value != "" && !seen[t.Value] {
				seen[t.Value] = true
				out = append(out, t.Value)
			}
		}
	}
	return out
}
