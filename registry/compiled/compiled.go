// Package compiled maps a compile result to the OCI artifacts a
// publication pushes: the one place that knows how a compiled target and a
// release manifest become registry.Artifact and registry.Release, used by
// `configpub publish` and the promoter alike. It is apart from package
// registry so that pulling and verifying (what runtimes do) does not depend
// on the compiler.
package compiled

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"iter"
	"path"
	"slices"
	"strconv"

	"github.com/opencontainers/go-digest"

	"github.com/configpub/configpub/bundle"
	"github.com/configpub/configpub/compiler"
	"github.com/configpub/configpub/internal/jcs"
	"github.com/configpub/configpub/internal/render"
	"github.com/configpub/configpub/registry"
)

// Artifact maps a compiled target to its values artifact. The manifest is
// stamped with the envelope's createdAt (the snapshot's), so an unchanged
// snapshot re-publishes to the same manifest digest.
func Artifact(t *compiler.Target) (registry.Artifact, error) {
	created, err := bundle.ParseTime(t.Envelope.CreatedAt)
	if err != nil {
		return registry.Artifact{}, fmt.Errorf("%w target %s/%s/%s: envelope createdAt %q: %w", registry.ErrInvalid, t.EnvTag, t.Host, t.ServiceID, t.Envelope.CreatedAt, err)
	}
	return registry.Artifact{
		Host: t.Host, ServiceID: t.ServiceID, EnvTag: t.EnvTag, Audience: t.Audience,
		SnapshotID: t.SnapshotID, PublicationID: t.PublicationID,
		PolicyDigest: t.PolicyDigest, ContentDigest: t.ContentDigest, ArtifactDigest: t.ArtifactDigest,
		ReleaseVersion: t.ReleaseVersion, CreatedAt: created, Values: t.Values,
	}, nil
}

// Release maps a compile result to the release artifact: the release's
// files (the root releases/<env>.yaml and every shard, exact bytes, taken
// from res.ReleaseArchive as compiled, not rendered again) in one RFC 8785
// JSON document, stamped with the release's createdAt.
func Release(res *compiler.Result) (*registry.Release, error) {
	files, err := releaseFiles(res)
	if err != nil {
		return nil, err
	}
	return release(&res.Manifest.ReleaseHeader, res.Manifest.ReleaseDigest, files)
}

// releaseRef is Release named by its document's digest and size, without
// the document (registry.Release.ManifestDigest): what looking the release
// artifact up needs.
func releaseRef(res *compiler.Result) (*registry.Release, error) {
	files, err := releaseFiles(res)
	if err != nil {
		return nil, err
	}
	return releaseByDigest(&res.Manifest.ReleaseHeader, res.Manifest.ReleaseDigest, each(files))
}

// releaseFiles returns the files of res's release (res.ReleaseArchive).
func releaseFiles(res *compiler.Result) ([]bundle.ReleaseFile, error) {
	m := res.Manifest
	archive, err := res.ReleaseArchive()
	if err != nil {
		return nil, fmt.Errorf("release manifest %s/%d: %w", m.EnvTag, m.ReleaseVersion, err)
	}
	files, err := bundle.SplitArchive(archive)
	if err != nil {
		return nil, fmt.Errorf("release manifest %s/%d: %w", m.EnvTag, m.ReleaseVersion, err)
	}
	return files, nil
}

// each yields files, in order.
func each(files []bundle.ReleaseFile) iter.Seq2[bundle.ReleaseFile, error] {
	return func(yield func(bundle.ReleaseFile, error) bool) {
		for _, f := range files {
			if !yield(f, nil) {
				return
			}
		}
	}
}

// committedRelease maps the release of envTag committed in the policy tree
// fsys (releases/<envTag>.yaml, then every shard it lists, exact bytes) to
// the release artifact named by its document's digest
// (registry.Release.ManifestDigest), from its root's parameters and its
// files' bytes, read one at a time, without parsing or compiling the
// release. For a release that is up to date it names Release of its
// compile. Nil when the files are not of a sharded release whose root reads
// and whose shards are exactly those it lists: only a compile can say what
// is wrong.
func committedRelease(fsys fs.FS, envTag string) *registry.Release {
	rootPath := compiler.ManifestPath(envTag)
	b, err := fs.ReadFile(fsys, rootPath)
	if err != nil {
		return nil
	}
	root, err := bundle.ParseRoot(rootPath, b)
	if err != nil {
		return nil
	}
	listed := make(map[string]bool, len(root.Shards))
	for _, s := range root.Shards {
		listed[path.Base(bundle.ShardPath(envTag, s.Host))] = true
	}
	ents, err := fs.ReadDir(fsys, bundle.ShardDir(envTag))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	for _, e := range ents {
		if !listed[e.Name()] {
			return nil // another release than the root's: a compile says so
		}
	}
	files := func(yield func(bundle.ReleaseFile, error) bool) {
		if !yield(bundle.ReleaseFile{Path: rootPath, Bytes: b}, nil) {
			return
		}
		for _, s := range root.Shards {
			p := bundle.ShardPath(envTag, s.Host)
			sb, err := fs.ReadFile(fsys, p)
			if !yield(bundle.ReleaseFile{Path: p, Bytes: sb}, err) || err != nil {
				return
			}
		}
	}
	rel, err := releaseByDigest(&root.ReleaseHeader, root.ReleaseDigest, files)
	if err != nil {
		return nil
	}
	return rel
}

// release builds the release artifact with its document from a release's
// files.
func release(h *bundle.ReleaseHeader, releaseDigest string, files []bundle.ReleaseFile) (*registry.Release, error) {
	rel, err := releaseOf(h)
	if err != nil {
		return nil, err
	}
	if rel.Manifest, err = appendReleaseDocument(nil, h, releaseDigest, files); err != nil {
		return nil, fmt.Errorf("release manifest %s/%d as JCS: %w", h.EnvTag, h.ReleaseVersion, err)
	}
	return rel, nil
}

// releaseByDigest builds the release artifact named by its document's
// digest and size, which are computed as the document is written, from
// files as they come, without holding it.
func releaseByDigest(h *bundle.ReleaseHeader, releaseDigest string, files iter.Seq2[bundle.ReleaseFile, error]) (*registry.Release, error) {
	rel, err := releaseOf(h)
	if err != nil {
		return nil, err
	}
	hash := sha256.New()
	n := &countingWriter{w: hash}
	if err := writeReleaseDocument(n, h, releaseDigest, files); err != nil {
		return nil, fmt.Errorf("release manifest %s/%d as JCS: %w", h.EnvTag, h.ReleaseVersion, err)
	}
	rel.ManifestDigest, rel.ManifestSize = digest.NewDigest(digest.SHA256, hash), n.n
	return rel, nil
}

// releaseOf returns the release artifact of h, without its document.
func releaseOf(h *bundle.ReleaseHeader) (*registry.Release, error) {
	created, err := bundle.ParseTime(h.CreatedAt)
	if err != nil {
		return nil, fmt.Errorf("%w release manifest %s/%d: createdAt %q: %w", registry.ErrInvalid, h.EnvTag, h.ReleaseVersion, h.CreatedAt, err)
	}
	return &registry.Release{EnvTag: h.EnvTag, ReleaseVersion: h.ReleaseVersion, CreatedAt: created}, nil
}

// countingWriter counts what it passes on to w.
type countingWriter struct {
	w io.Writer
	n int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// appendReleaseDocument appends the release artifact's layer, as
// writeReleaseDocument writes it, to dst grown once to about its size.
func appendReleaseDocument(dst []byte, h *bundle.ReleaseHeader, releaseDigest string, files []bundle.ReleaseFile) ([]byte, error) {
	size := 256 + len(h.APIVersion) + len(h.EnvTag) + len(h.Kind) + len(releaseDigest)
	for _, f := range files {
		size += 128 + len(f.Path) + len(f.Bytes) + len(f.Bytes)/16 // newlines and quotes are escaped
	}
	buf := bytes.NewBuffer(slices.Grow(dst, size))
	if err := writeReleaseDocument(buf, h, releaseDigest, each(files)); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// writeReleaseDocument writes the release artifact's layer: the release
// manifest's files (root first, then one shard per host) with their exact
// bytes, as the RFC 8785 JSON document {apiVersion, envTag, files: [{content,
// digest, path}], kind, releaseDigest, releaseVersion}: members in JCS
// order, strings as jcs.AppendString writes them, the version an integer.
// Written directly rather than through render.Marshal, which holds the
// document several times over (a release of 100,000 targets has 65 MB of
// files); the bytes are the same (TestReleaseDocumentIsCanonical).
func writeReleaseDocument(w io.Writer, h *bundle.ReleaseHeader, releaseDigest string, files iter.Seq2[bundle.ReleaseFile, error]) error {
	d := &docWriter{w: w}
	d.raw(`{"apiVersion":`)
	d.str(h.APIVersion)
	d.raw(`,"envTag":`)
	d.str(h.EnvTag)
	d.raw(`,"files":[`)
	i := 0
	for f, err := range files {
		if err != nil {
			return fmt.Errorf("%s: %w", f.Path, err)
		}
		if i > 0 {
			d.raw(",")
		}
		i++
		d.raw(`{"content":`)
		d.str(string(f.Bytes))
		if d.err != nil {
			return fmt.Errorf("%s: %w", f.Path, d.err)
		}
		d.raw(`,"digest":`)
		d.str(render.BytesDigest(f.Bytes))
		d.raw(`,"path":`)
		d.str(f.Path)
		d.raw("}")
	}
	d.raw(`],"kind":`)
	d.str(h.Kind)
	d.raw(`,"releaseDigest":`)
	d.str(releaseDigest)
	d.raw(`,"releaseVersion":`)
	d.raw(strconv.FormatInt(h.ReleaseVersion, 10))
	d.raw("}")
	return d.err
}

// docWriter writes a JSON document's parts to w, strings through one
// reused buffer; the first error stops it and stays in err.
type docWriter struct {
	w   io.Writer
	buf []byte
	err error
}

func (d *docWriter) raw(s string) {
	if d.err == nil {
		_, d.err = io.WriteString(d.w, s)
	}
}

func (d *docWriter) str(s string) {
	if d.err != nil {
		return
	}
	if d.buf, d.err = jcs.AppendString(d.buf[:0], s); d.err == nil {
		_, d.err = d.w.Write(d.buf)
	}
}

// Artifacts maps a compile result to what a publication pushes: one values
// artifact per target, in the result's order, and the release artifact.
func Artifacts(res *compiler.Result) ([]registry.Artifact, *registry.Release, error) {
	arts := make([]registry.Artifact, 0, len(res.Targets))
	for i := range res.Targets {
		a, err := Artifact(&res.Targets[i])
		if err != nil {
			return nil, nil, err
		}
		arts = append(arts, a)
	}
	rel, err := Release(res)
	if err != nil {
		return nil, nil, err
	}
	return arts, rel, nil
}

// Stream yields the values artifact of every target of res, in manifest
// order, for registry.Client.PublishSeq. A result compiled with
// compiler.Options.ManifestOnly is compiled again host by host while the
// stream is consumed (compiler.Result.EachTarget), so that neither side
// holds every artifact; the compile runs one artifact ahead of the
// consumer. A failure is yielded as the sequence's last error. Stopping the
// range early stops the compile.
func Stream(ctx context.Context, res *compiler.Result) iter.Seq2[registry.Artifact, error] {
	type item struct {
		a   registry.Artifact
		err error
	}
	return func(yield func(registry.Artifact, error) bool) {
		ctx, cancel := context.WithCancel(ctx)
		ch := make(chan item, 1)
		go func() {
			defer close(ch)
			send := func(it item) error {
				select {
				case ch <- it:
					return nil
				case <-ctx.Done():
					return ctx.Err()
				}
			}
			err := res.EachTarget(ctx, func(t *compiler.Target) error {
				a, err := Artifact(t)
				if err != nil {
					return err
				}
				return send(item{a: a})
			})
			if err != nil && ctx.Err() == nil {
				_ = send(item{err: err})
			}
		}()
		defer func() {
			cancel()
			for range ch { // let the compile see the cancellation and end
			}
		}()
		for it := range ch {
			if !yield(it.a, it.err) || it.err != nil {
				return
			}
		}
		if err := ctx.Err(); err != nil {
			yield(registry.Artifact{}, err) // the compile stopped because ctx ended
		}
	}
}

// FindPublished looks up the release artifact of the release of envTag
// committed in the policy tree fsys from its files as committed (root, then
// every shard, read one at a time and hashed into the release document's
// digest as it is written), without parsing or compiling the release, and
// returns it when it is in place: the release artifact is pushed last, once
// every target is complete, so the whole release is published and nothing
// needs compiling. False when it is not in place, and when the files or the
// registry cannot tell (another release N in place, a registry that does
// not answer): a compile then says whether the committed release is stale,
// and PublishRelease reports the registry's answer.
func FindPublished(ctx context.Context, c *registry.Client, prefix string, fsys fs.FS, envTag string) (registry.Result, *registry.Release, bool) {
	rel := committedRelease(fsys, envTag)
	if rel == nil {
		return registry.Result{}, nil, false
	}
	r, ok, err := c.Published(ctx, prefix, *rel)
	if err != nil || !ok {
		return registry.Result{}, nil, false
	}
	return r, rel, true
}

// PublishRelease publishes the release of res the way `configpub publish`
// does. With recheck every artifact is checked down to its blobs and
// signature (registry.PublishRequest.Recheck). Unless recheck or
// req.EnsureSignatures is set, a release artifact
// already in place ends it: the release artifact is pushed last, once
// every target is complete, so it says the whole release was published;
// that Result is returned as present and nothing else is checked (callers
// that have the committed files look it up before compiling:
// FindPublished). Otherwise every target streams from res (Stream) into
// c.PublishSeq, the release artifact last, built from res again when it
// is pushed (req.ReleaseFrom). res is prepared for streaming only first
// (compiler.Result.ForStreaming: its manifest keeps the release header and
// no entries). req.Release and req.Artifacts must be empty.
func PublishRelease(ctx context.Context, c *registry.Client, res *compiler.Result, req registry.PublishRequest, recheck bool) (sum *registry.Summary, present *registry.Result, err error) {
	// The release is only streamed and reported from here on: the
	// manifest's entries go (ForStreaming) before the release document
	// (every release file, tens of megabytes for a large release) is built
	// to look it up; it is built again when it is pushed, after every
	// target, rather than held while they stream.
	res.ForStreaming()
	if !recheck && !req.EnsureSignatures {
		rel, err := releaseRef(res)
		if err != nil {
			return nil, nil, err
		}
		r, ok, err := c.Published(ctx, req.Prefix, *rel)
		if err != nil {
			return nil, nil, fmt.Errorf("publish %s: %w", res.Manifest.EnvTag, err)
		}
		if ok {
			return &registry.Summary{AlreadyPresent: 1}, &r, nil
		}
	}
	req.Recheck = req.Recheck || recheck
	req.Release, req.ReleaseFrom = nil, func() (*registry.Release, error) { return Release(res) }
	sum, err = c.PublishSeq(ctx, req, Stream(ctx, res))
	return sum, nil, err
}
