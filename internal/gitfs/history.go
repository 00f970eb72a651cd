package gitfs

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"regexp"
	"slices"
	"strconv"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"

	"github.com/configpub/configpub/bundle"
)

// releaseVersionRE finds the releaseVersion line of a release manifest
// written by configpub (configpub-yaml/1 writes it fourth, unindented).
// A line may end in CRLF: a repository can store its release files so
// (committed from a Windows checkout without core.autocrlf), and the
// compiler reads them as LF.
var releaseVersionRE = regexp.MustCompile(`(?m)^releaseVersion: ([0-9]{1,16})\r?$`)

// maxManifestBytes bounds one release manifest root read while the
// history is walked (a reader of the tree returned bounds the rest: the
// compiler reads it through its policy-tree limits).
const maxManifestBytes = 64 << 20

// ReleaseTrees returns a lookup of recorded releases in Git: the files of
// dir (a directory inside a Git working tree) at the newest commit of the
// first-parent history of rev whose releases/<envTag>.yaml is the release
// asked for (an fs.FS rooted at dir, read lazily, as TreeFS), from which a
// reader takes the root and the shards it lists one at a time. It matches
// compiler.PreviousTree. A release not found there wraps
// bundle.ErrReleaseNotRecorded (see findReleaseIn for where the walk stops).
func ReleaseTrees(dir, rev string) func(ctx context.Context, envTag string, version int64) (fs.FS, error) {
	return func(ctx context.Context, envTag string, version int64) (fs.FS, error) {
		r, prefix, err := openAt(dir)
		if err != nil {
			return nil, fmt.Errorf("release %d of %s: %w", version, envTag, err)
		}
		return releaseTree(ctx, r, prefix, rev, envTag, version)
	}
}

// FindRelease is ReleaseTrees for one release: the files of dir (rooted
// there) at the newest commit of the first-parent history of rev whose
// releases/<envTag>.yaml is release version, and that commit's hash. An
// error wraps ErrNotRepository when dir is not inside a Git working tree,
// bundle.ErrReleaseNotRecorded when the history does not hold the release.
func FindRelease(ctx context.Context, dir, rev, envTag string, version int64) (fs.FS, string, error) {
	f, err := findRelease(ctx, dir, rev, envTag, version)
	if err != nil {
		return nil, "", err
	}
	h := f.commit.Hash.String()
	fsys, err := subTree(f.commit, f.prefix, h)
	if err != nil {
		return nil, "", fmt.Errorf("release %d of %s: %w", version, envTag, err)
	}
	return fsys, h, nil
}

// RepoReleaseTrees is ReleaseTrees in repository r, whose directory dir
// (slash-separated, "" for its root) is the policy repository; the trees
// are rooted at dir.
func RepoReleaseTrees(r *git.Repository, dir, rev string) func(ctx context.Context, envTag string, version int64) (fs.FS, error) {
	return func(ctx context.Context, envTag string, version int64) (fs.FS, error) {
		return releaseTree(ctx, r, dir, rev, envTag, version)
	}
}

// releaseTree returns the tree of the policy repository at prefix in r at
// the commit where the first-parent history of rev holds release version.
func releaseTree(ctx context.Context, r *git.Repository, prefix, rev, envTag string, version int64) (fs.FS, error) {
	f, err := findReleaseIn(ctx, r, prefix, rev, envTag, version)
	if err != nil {
		return nil, err
	}
	fsys, err := Tree(f.commit)
	if err != nil {
		return nil, fmt.Errorf("release %d of %s: %w", version, envTag, err)
	}
	if prefix == "" {
		return fsys, nil
	}
	sub, err := fs.Sub(fsys, prefix)
	if err != nil {
		return nil, fmt.Errorf("release %d of %s: tree %s at %s: %w", version, envTag, prefix, f.commit.Hash, err)
	}
	return sub, nil
}

// releaseDigestRE finds the releaseDigest line of a release manifest root
// written by configpub (its last line, unindented), ending in LF or CRLF
// as releaseVersionRE's.
var releaseDigestRE = regexp.MustCompile(`(?m)^releaseDigest: "(sha256:[0-9a-f]{64})"\r?$`)

// walkEnd says why a walk of releases ended.
type walkEnd int

const (
	endStopped walkEnd = iota // the visitor stopped it
	endRoot                   // at the first commit of the history
	endNoFile                 // at a commit without the release file, where its history starts
	endMissing                // at a commit whose first parent the repository does not hold
)

// walked is where a walk of releases ended: why, at which commit, and how
// many commits below the one it started from.
type walked struct {
	end   walkEnd
	at    *object.Commit
	depth int
}

// eachRelease walks the first-parent history from c and calls visit once
// per release root that differs from the one above it (the commit it is
// first seen at going down, its releaseVersion and bytes; a root without a
// releaseVersion line is passed over), until visit returns true or the
// history, or the file's history, ends.
func eachRelease(ctx context.Context, c *object.Commit, file string, visit func(c *object.Commit, version int64, root []byte) bool) (walked, error) {
	var last plumbing.Hash
	for depth := 0; ; depth++ {
		if err := ctx.Err(); err != nil {
			return walked{}, err
		}
		f, err := c.File(file)
		switch {
		case errors.Is(err, object.ErrFileNotFound):
			return walked{endNoFile, c, depth}, nil
		case err != nil:
			return walked{}, fmt.Errorf("%s at %s: %w", file, c.Hash, err)
		case f.Hash != last:
			last = f.Hash
			b, err := readBlob(f)
			if err != nil {
				return walked{}, fmt.Errorf("%s at %s: %w", file, c.Hash, err)
			}
			if m := releaseVersionRE.FindSubmatch(b); m != nil {
				v, _ := strconv.ParseInt(string(m[1]), 10, 64)
				if visit(c, v, b) {
					return walked{endStopped, c, depth}, nil
				}
			}
		}
		if c.NumParents() == 0 {
			return walked{endRoot, c, depth}, nil
		}
		parent, err := c.Parent(0)
		if errors.Is(err, plumbing.ErrObjectNotFound) {
			return walked{endMissing, c, depth}, nil
		}
		if err != nil {
			return walked{}, fmt.Errorf("first parent of %s: %w", c.Hash.String()[:12], err)
		}
		c = parent
	}
}

// NewerRelease reports whether the release a working tree holds (version,
// releaseDigest digest) went back: whether the first-parent history of rev
// holds a newer release above a commit that holds this very release (a
// revert of a release puts back its files). It returns the newer release's
// version and commit, or 0 and "" — also for a release not in the history
// (one just compiled on an older base, say) and when the walk reaches a
// commit the repository does not hold (a shallow clone) or one without the
// file (where its history starts).
func NewerRelease(ctx context.Context, dir, rev, envTag string, version int64, digest string) (int64, string, error) {
	r, prefix, err := openAt(dir)
	if err != nil {
		return 0, "", err
	}
	c, err := commit(r, rev)
	if errors.Is(err, plumbing.ErrReferenceNotFound) {
		return 0, "", nil
	}
	if err != nil {
		return 0, "", err
	}
	var (
		newer int64
		at    string // the newer release's commit
		back  bool   // this very release found below it
	)
	_, err = eachRelease(ctx, c, path.Join(prefix, "releases", envTag+".yaml"), func(c *object.Commit, v int64, root []byte) bool {
		switch {
		case v > version:
			if newer == 0 {
				newer, at = v, c.Hash.String()
			}
			return false
		case v < version:
			return true
		case newer == 0: // the working tree's own, not yet below a newer one
			return false
		}
		d := releaseDigestRE.FindSubmatch(root)
		back = d != nil && string(d[1]) == digest
		return true
	})
	if err != nil || !back {
		return 0, "", err
	}
	return newer, at, nil
}

// foundRelease is where findRelease found a release: the commit, dir's
// path in its tree, the root's path and bytes.
type foundRelease struct {
	commit *object.Commit
	prefix string
	file   string
	root   []byte
}

// findRelease walks the first-parent history of rev from its newest commit
// for the one whose releases/<envTag>.yaml (relative to dir) is release
// version (see findReleaseIn).
func findRelease(ctx context.Context, dir, rev, envTag string, version int64) (*foundRelease, error) {
	r, prefix, err := openAt(dir)
	if err != nil {
		return nil, fmt.Errorf("release %d of %s: %w", version, envTag, err)
	}
	return findReleaseIn(ctx, r, prefix, rev, envTag, version)
}

// ReleaseCommit returns the commit of repository r, whose directory dir
// (slash-separated, "" for its root) is the policy repository, where the
// first-parent history of rev holds release version of envTag (dir's
// releases/<envTag>.yaml), found as ReleaseTrees finds it (the newest such
// commit), or an error wrapping bundle.ErrReleaseNotRecorded.
func ReleaseCommit(ctx context.Context, r *git.Repository, dir, rev, envTag string, version int64) (string, error) {
	f, err := findReleaseIn(ctx, r, dir, rev, envTag, version)
	if err != nil {
		return "", err
	}
	return f.commit.Hash.String(), nil
}

// IntroducingCommit returns the oldest commit of the first-parent history
// from commit (a full hash) whose releases/<envTag>.yaml (in directory dir
// of repository r, slash-separated, "" for its root) is the very file
// commit holds, without a commit in between that holds another: where the
// release was committed. ReleaseCommit returns the newest commit holding a
// release; a later commit that changed sources without compiling (a
// pull-request check bypassed) holds the same release with sources it is
// not compiled from, and the commit that introduced it is the one to
// promote it from. A walk that reaches a commit the repository does not
// hold stops there.
func IntroducingCommit(ctx context.Context, r *git.Repository, dir, commit, envTag string) (string, error) {
	c, err := r.CommitObject(plumbing.NewHash(commit))
	if err != nil {
		return "", fmt.Errorf("commit %s: %w", commit, err)
	}
	file := path.Join(dir, "releases", envTag+".yaml")
	f, err := c.File(file)
	if err != nil {
		return "", fmt.Errorf("%s at %s: %w", file, c.Hash, err)
	}
	want := f.Hash
	for c.NumParents() > 0 {
		if err := ctx.Err(); err != nil {
			return "", err
		}
		parent, err := c.Parent(0)
		if errors.Is(err, plumbing.ErrObjectNotFound) {
			break
		}
		if err != nil {
			return "", fmt.Errorf("first parent of %s: %w", c.Hash.String()[:12], err)
		}
		pf, err := parent.File(file)
		if err != nil || pf.Hash != want {
			break // not there, or another release: c introduced it
		}
		c = parent
	}
	return c.Hash.String(), nil
}

// IntroducedTree returns the files of dir (a policy repository anywhere
// inside a Git working tree: its root or a subdirectory) as they are at
// the commit that introduced the release of envTag HEAD holds
// (IntroducingCommit, with dir's releases/<envTag>.yaml), rooted at dir.
func IntroducedTree(ctx context.Context, dir, envTag string) (fs.FS, error) {
	r, prefix, err := openAt(dir)
	if err != nil {
		return nil, err
	}
	head, err := commit(r, "HEAD")
	if err != nil {
		return nil, err
	}
	c, err := IntroducingCommit(ctx, r, prefix, head.Hash.String(), envTag)
	if err != nil {
		return nil, err
	}
	ic, err := r.CommitObject(plumbing.NewHash(c))
	if err != nil {
		return nil, fmt.Errorf("commit %s: %w", c, err)
	}
	return subTree(ic, prefix, c)
}

// findReleaseIn is findRelease in repository r, the policy repository
// being its directory prefix ("" for its root). Releases only grow along
// the first-parent history, except where a commit took a release back (a
// revert), so the walk stops at the second of two older releases in a row
// that do not grow back: below them, it is not; and at a commit without
// the file, where its history starts (a release file deleted and added
// again hides what is below). A commit whose parent the repository does
// not hold ends it with bundle.ErrHistoryIncomplete.
func findReleaseIn(ctx context.Context, r *git.Repository, prefix, rev, envTag string, version int64) (*foundRelease, error) {
	file := path.Join(prefix, "releases", envTag+".yaml")
	c, err := commit(r, rev)
	if errors.Is(err, plumbing.ErrReferenceNotFound) {
		return nil, fmt.Errorf("release %d of %s: %s has no commits: %w", version, envTag, rev, bundle.ErrReleaseNotRecorded)
	}
	if err != nil {
		return nil, err
	}
	var (
		found  *foundRelease
		below  int64          // the older release seen last (0: none since the last newer one)
		first  *object.Commit // where the first older release was seen, and its version
		firstV int64
	)
	w, err := eachRelease(ctx, c, file, func(c *object.Commit, v int64, root []byte) bool {
		switch {
		case v == version:
			found = &foundRelease{commit: c, prefix: prefix, file: file, root: root}
			return true
		case v < version && below != 0 && v <= below:
			return true // two older releases in a row: not below
		case v < version:
			below = v
			if first == nil {
				first, firstV = c, v
			}
		default: // newer: the history went back above (a revert)
			below = 0
		}
		return false
	})
	switch {
	case err != nil:
		return nil, fmt.Errorf("release %d of %s: %w", version, envTag, err)
	case found != nil:
		return found, nil
	case w.end == endMissing:
		return nil, incomplete(r, w.at, rev, w.depth, envTag, version)
	case first != nil:
		return nil, notInHistory(version, envTag, rev, first, firstV)
	case w.end == endNoFile:
		return nil, fmt.Errorf("release %d of %s is not in the first-parent history of %s (%s is not in %s): %w",
			version, envTag, rev, file, w.at.Hash.String()[:12], bundle.ErrReleaseNotRecorded)
	}
	return nil, fmt.Errorf("release %d of %s is not in the first-parent history of %s: %w", version, envTag, rev, bundle.ErrReleaseNotRecorded)
}

// notInHistory is the error of a walk for release version that found older
// releases only, the first of them, v, at commit c: what usually leads
// there, and what to run.
func notInHistory(version int64, envTag, rev string, c *object.Commit, v int64) error {
	return fmt.Errorf("release %d of %s is not in the first-parent history of %s (release %d at %s; a branch that compiled more than once? "+
		"build its release on the one of the branch it merges onto: configpub compile --base-ref <that branch>): %w",
		version, envTag, rev, v, c.Hash.String()[:12], bundle.ErrReleaseNotRecorded)
}

// incomplete is the error of a first-parent walk that reached commit c,
// depth commits below rev, whose first parent is not in repository r:
// what is missing, whether r is a shallow clone, and how to fetch the rest.
func incomplete(r *git.Repository, c *object.Commit, rev string, depth int, envTag string, version int64) error {
	at := rev + " itself"
	if depth > 0 {
		at = fmt.Sprintf("%d commits below %s", depth, rev)
	}
	why := "its first parent " + c.ParentHashes[0].String()[:12] + " is not in the repository"
	if shallow, err := r.Storer.Shallow(); err == nil && slices.Contains(shallow, c.Hash) {
		why = "a shallow clone, cut there"
	}
	return fmt.Errorf("release %d of %s: the first-parent history of %s ends at commit %s (%s; %s) before release %d: "+
		"fetch the full history (git fetch --unshallow, or fetch-depth: 0 with actions/checkout): %w",
		version, envTag, rev, c.Hash.String()[:12], at, why, version, bundle.ErrHistoryIncomplete)
}

func readBlob(f *object.File) ([]byte, error) {
	var buf bytes.Buffer
	if err := readBlobInto(&buf, f); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// readBlobInto reads f into buf (reset first), which keeps its room for
// the next.
func readBlobInto(buf *bytes.Buffer, f *object.File) error {
	buf.Reset()
	if f.Size > maxManifestBytes {
		return fmt.Errorf("%d bytes, more than %d", f.Size, maxManifestBytes)
	}
	rd, err := f.Reader()
	if err != nil {
		return err
	}
	defer rd.Close()
	buf.Grow(int(f.Size) + bytes.MinRead)
	_, err = buf.ReadFrom(io.LimitReader(rd, maxManifestBytes))
	return err
}
