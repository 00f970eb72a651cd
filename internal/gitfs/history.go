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
	"strconv"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"

	"github.com/configpub/configpub/bundle"
)

// releaseVersionRE finds the releaseVersion line of a release manifest
// written by configpub (configpub-yaml/1 writes it fourth, unindented).
var releaseVersionRE = regexp.MustCompile(`(?m)^releaseVersion: ([0-9]{1,16})$`)

// maxManifestBytes bounds one release manifest file read from history;
// maxReleaseBytes a whole release (root and shards).
const (
	maxManifestBytes = 64 << 20
	maxReleaseBytes  = 1 << 30
)

// ReleaseHistory returns a lookup of recorded releases in Git: the manifest
// releases/<envTag>.yaml (relative to dir, a directory inside a Git working
// tree), with its shards, at the newest commit of the first-parent history of rev whose
// manifest is the release asked for. It matches compiler.PreviousRelease.
// A release not found there wraps bundle.ErrReleaseNotRecorded; the walk
// stops at the first older release.
func ReleaseHistory(dir, rev string) func(ctx context.Context, envTag string, version int64) ([]byte, error) {
	return func(ctx context.Context, envTag string, version int64) ([]byte, error) {
		f, err := findRelease(ctx, dir, rev, envTag, version)
		if err != nil {
			return nil, err
		}
		return releaseAt(f.commit, f.prefix, envTag, f.file, f.root)
	}
}

// ReleaseTrees is ReleaseHistory that returns, instead of the release's
// bytes, the files of dir at the commit that recorded it (an fs.FS rooted
// at dir, read lazily, as TreeFS): a reader takes the root and the shards
// it lists from there one at a time. It matches compiler.PreviousTree.
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
					return nil, fmt.Errorf("release %d of %s is not in the first-parent history of %s (release %d at %s): %w", version, envTag, rev, v, c.Hash.String()[:12], bundle.ErrReleaseNotRecorded)
				}
			}
		}
		if c.NumParents() == 0 {
			break
		}
		if c, err = c.Parent(0); err != nil {
			return nil, fmt.Errorf("first parent: %w", err)
		}
	}
	return nil, fmt.Errorf("release %d of %s is not in the first-parent history of %s: %w", version, envTag, rev, bundle.ErrReleaseNotRecorded)
}

// releaseAt returns the release whose root is b at commit c: b itself for
// a single-file manifest, else the release archive of b and every shard
// it lists (bundle.Archive). The shards are looked up in their directory's
// tree, decoded once (not walked from the commit's root for each), and
// read into the archive one by one.
func releaseAt(c *object.Commit, prefix, envTag, file string, b []byte) ([]byte, error) {
	if !bundle.IsSharded(b) {
		return b, nil
	}
	refs, err := bundle.ShardRefs(file, b)
	if err != nil {
		return nil, fmt.Errorf("%s at %s: %w", file, c.Hash, err)
	}
	root, err := c.Tree()
	if err != nil {
		return nil, fmt.Errorf("tree of %s: %w", c.Hash, err)
	}
	var dir *object.Tree
	if len(refs) > 0 {
		d := path.Join(prefix, bundle.ShardDir(envTag))
		if dir, err = root.Tree(d); err != nil {
			return nil, fmt.Errorf("%s at %s: %w", d, c.Hash, err)
		}
	}
	type shard struct {
		path string
		f    *object.File
	}
	shards := make([]shard, len(refs))
	total := int64(len(b))
	room := bundle.ArchiveEntrySize(bundle.RootPath(envTag), len(b))
	for k, r := range refs {
		rel := bundle.ShardPath(envTag, r.Host)
		f, err := dir.File(path.Base(rel))
		if err != nil {
			return nil, fmt.Errorf("%s at %s: %w", rel, c.Hash, err)
		}
		if total += f.Size; total > maxReleaseBytes {
			return nil, fmt.Errorf("release at %s: more than %d bytes", c.Hash, maxReleaseBytes)
		}
		room += bundle.ArchiveEntrySize(rel, int(f.Size))
		shards[k] = shard{rel, f}
	}
	out := bundle.AppendArchive(bundle.NewArchive(room), bundle.RootPath(envTag), b)
	var buf bytes.Buffer
	for _, s := range shards {
		if err := readBlobInto(&buf, s.f); err != nil {
			return nil, fmt.Errorf("%s at %s: %w", s.path, c.Hash, err)
		}
		out = bundle.AppendArchive(out, s.path, buf.Bytes())
	}
	return out, nil
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
