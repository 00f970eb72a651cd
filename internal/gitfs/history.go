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
var releaseVersionRE = regexp.MustCompile(`(?m)^releaseVersion: ([0-9]{1,16})$`)

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
// bundle.ErrReleaseNotRecorded; the walk stops at the first older release.
func ReleaseTrees(dir, rev string) func(ctx context.Context, envTag string, version int64) (fs.FS, error) {
	return func(ctx context.Context, envTag string, version int64) (fs.FS, error) {
		f, err := findRelease(ctx, dir, rev, envTag, version)
		if err != nil {
			return nil, err
		}
		fsys, err := Tree(f.commit)
		if err != nil {
			return nil, fmt.Errorf("release %d of %s: %w", version, envTag, err)
		}
		if f.prefix == "" {
			return fsys, nil
		}
		sub, err := fs.Sub(fsys, f.prefix)
		if err != nil {
			return nil, fmt.Errorf("release %d of %s: tree %s at %s: %w", version, envTag, f.prefix, f.commit.Hash, err)
		}
		return sub, nil
	}
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
// version, stopping at the first older release.
func findRelease(ctx context.Context, dir, rev, envTag string, version int64) (*foundRelease, error) {
	r, prefix, err := openAt(dir)
	if err != nil {
		return nil, fmt.Errorf("release %d of %s: %w", version, envTag, err)
	}
	file := path.Join(prefix, "releases", envTag+".yaml")
	c, err := commit(r, rev)
	if errors.Is(err, plumbing.ErrReferenceNotFound) {
		return nil, fmt.Errorf("release %d of %s: %s has no commits: %w", version, envTag, rev, bundle.ErrReleaseNotRecorded)
	}
	if err != nil {
		return nil, err
	}
	var last plumbing.Hash
	depth := 0 // commits below rev
	for c != nil {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		f, err := c.File(file)
		switch {
		case errors.Is(err, object.ErrFileNotFound):
		case err != nil:
			return nil, fmt.Errorf("%s at %s: %w", file, c.Hash, err)
		case f.Hash != last:
			last = f.Hash
			b, err := readBlob(f)
			if err != nil {
				return nil, fmt.Errorf("%s at %s: %w", file, c.Hash, err)
			}
			if m := releaseVersionRE.FindSubmatch(b); m != nil {
				v, _ := strconv.ParseInt(string(m[1]), 10, 64)
				if v == version {
					return &foundRelease{commit: c, prefix: prefix, file: file, root: b}, nil
				}
				if v < version {
					return nil, fmt.Errorf("release %d of %s is not in the first-parent history of %s (release %d at %s; a branch that compiled more than once? "+
						"build its release on the one of the branch it merges onto: configpub compile --base-ref <that branch>): %w",
						version, envTag, rev, v, c.Hash.String()[:12], bundle.ErrReleaseNotRecorded)
				}
			}
		}
		if c.NumParents() == 0 {
			break
		}
		parent, err := c.Parent(0)
		if errors.Is(err, plumbing.ErrObjectNotFound) {
			return nil, incomplete(r, c, rev, depth, envTag, version)
		}
		if err != nil {
			return nil, fmt.Errorf("release %d of %s: first parent of %s: %w", version, envTag, c.Hash.String()[:12], err)
		}
		c = parent
		depth++
	}
	return nil, fmt.Errorf("release %d of %s is not in the first-parent history of %s: %w", version, envTag, rev, bundle.ErrReleaseNotRecorded)
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
