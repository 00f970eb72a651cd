package compiler

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/configpub/configpub/bundle"
	"github.com/configpub/configpub/internal/atomicfile"
	"github.com/configpub/configpub/internal/policytree"
	"github.com/configpub/configpub/internal/render"
)

// StagedTargetType is the type of target.json, the staged target manifest
// written next to each values.yml.
const StagedTargetType = "configpub.dev/staged-target/v1"

// StagedTarget returns the canonical (RFC 8785) bytes of a target's staged
// target manifest: identity, publication and snapshot ids, every input file
// digest, the complete resolved property set and the expected digests.
func StagedTarget(t *Target) ([]byte, error) {
	inputs := render.List()
	for _, p := range sortedKeys(t.InputDigests) {
		inputs.Items = append(inputs.Items, render.Map().Add("path", render.String(p)).Add("digest", render.String(t.InputDigests[p])))
	}
	var props render.Value
	if err := json.Unmarshal(t.PropertySet, &props); err != nil {
		return nil, fmt.Errorf("staged target %s: %w", t.Identity(), err)
	}
	v := render.Map().
		Add("type", render.String(StagedTargetType)).
		Add("host", render.String(t.Host)).
		Add("serviceId", render.String(t.ServiceID)).
		Add("envTag", render.String(t.EnvTag)).
		Add("audience", render.String(t.Audience)).
		Add("subjectKind", render.String(t.SubjectKind)).
		Add("subjectName", render.String(t.SubjectName)).
		Add("publicationId", render.String(t.PublicationID)).
		Add("snapshotId", render.String(t.SnapshotID)).
		Add("policySnapshotId", render.String(t.PolicySnapshotID)).
		Add("releaseVersion", render.Int(t.ReleaseVersion)).
		Add("policyVersion", render.Int(t.PolicyVersion)).
		Add("sourceEventSequence", render.Int(t.Envelope.SourceEventSequence)).
		Add("compatibilityGeneration", render.Int(t.Envelope.CompatibilityGeneration)).
		Add("policyDigest", render.String(t.PolicyDigest)).
		Add("contentDigest", render.String(t.ContentDigest)).
		Add("propertySetDigest", render.String(t.PropertySetDigest)).
		Add("artifactDigest", render.String(t.ArtifactDigest)).
		Add("leaseProfile", render.String(t.LeaseProfile)).
		Add("deliveryLease", render.Map().
			Add("refreshAfter", render.String(t.DeliveryLease.RefreshAfter.String())).
			Add("expiresAfter", render.String(t.DeliveryLease.ExpiresAfter.String()))).
		Add("inputs", inputs).
		Add("properties", &props)
	return render.Canonical(v)
}

// Write makes a compile visible on disk. When outDir is non-empty it writes
// OUT/<env>/<host>/<serviceId>/values.yml and target.json for every target
// (through Result.EachTarget: a ManifestOnly result compiles them again
// host by host, so memory does not hold every artifact): everything is
// staged in a temporary directory next to OUT/<env> and renamed into
// place, so readers see the old tree or the new one, never a mix;
// directories are created 0755 and files 0644. When repoDir is
// non-empty and the release manifest changed (Result.Unchanged), it
// rewrites the release manifest under repoDir: every shard
// releases/<env>/<host>.yaml whose bytes differ from the file there, then
// the root releases/<env>.yaml, each atomically (temp file, fsync,
// rename), refusing to write through a symbolic link or outside repoDir,
// and removes the entries of releases/<env>/ the root no longer lists.
// ctx is checked before the release's first file is written, not between
// its files: a release whose writing began is written whole (a few local
// files), so an interrupted compile leaves the release before or the new
// one, never new shards under the old root. A process killed mid-way
// leaves a release that compile --check reports stale and the next compile
// completes. An up-to-date manifest is not rewritten.
func Write(ctx context.Context, res *Result, repoDir, outDir string) error {
	env := res.Manifest.EnvTag
	if outDir != "" {
		if err := writeOutputs(ctx, res, outDir, env); err != nil {
			return err
		}
	}
	if repoDir != "" && !res.Unchanged() {
		if err := writeRelease(ctx, repoDir, env, res); err != nil {
			return fmt.Errorf("write release manifest: %w", err)
		}
	}
	return nil
}

// writeRelease writes the files of the release that differ from those in
// repoDir and removes the shards it no longer has.
func writeRelease(ctx context.Context, repoDir, env string, res *Result) error {
	files, err := bundle.SplitArchive(res.ManifestBytes)
	if err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err // nothing written yet
	}
	keep := map[string]bool{}
	// Shards first, the root (which names their digests) last; once begun,
	// to the end.
	for i := len(files) - 1; i >= 0; i-- {
		f := files[i]
		keep[f.Path] = true
		if sameFile(filepath.Join(repoDir, filepath.FromSlash(f.Path)), f.Bytes) {
			continue
		}
		if err := policytree.WriteFile(repoDir, f.Path, f.Bytes, 0o644); err != nil {
			return err
		}
	}
	dir := filepath.Join(repoDir, filepath.FromSlash(bundle.ShardDir(env)))
	fi, err := os.Lstat(dir)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if !fi.IsDir() {
		return fmt.Errorf("%s is not a directory", bundle.ShardDir(env))
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, e := range ents {
		if keep[bundle.ShardDir(env)+"/"+e.Name()] {
			continue
		}
		if err := os.Remove(filepath.Join(dir, e.Name())); err != nil {
			return err
		}
	}
	return atomicfile.SyncDir(dir)
}

func writeOutputs(ctx context.Context, res *Result, outDir, env string) error {
	if err := os.MkdirAll(outDir, 0o755); err != nil {
		return fmt.Errorf("write outputs: %w", err)
	}
	if !localName(env) {
		return fmt.Errorf("write outputs: envTag %q is not a single path component", env)
	}
	stage, err := os.MkdirTemp(outDir, "."+env+".staging-")
	if err != nil {
		return fmt.Errorf("write outputs: %w", err)
	}
	defer os.RemoveAll(stage)
	// MkdirTemp creates 0700; the tree is for other readers too.
	if err := os.Chmod(stage, 0o755); err != nil {
		return fmt.Errorf("write outputs: %w", err)
	}
	err = res.EachTarget(ctx, func(t *Target) error {
		if !localName(t.Host) || !localName(t.ServiceID) {
			return fmt.Errorf("write outputs: target %s/%s is not a pair of single path components", t.Host, t.ServiceID)
		}
		dir := filepath.Join(stage, t.Host, t.ServiceID)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return fmt.Errorf("write outputs: %w", err)
		}
		staged, err := StagedTarget(t)
		if err != nil {
			return err
		}
		if err := writeSynced(filepath.Join(dir, "values.yml"), t.Values); err != nil {
			return fmt.Errorf("write outputs: %w", err)
		}
		if err := writeSynced(filepath.Join(dir, "target.json"), staged); err != nil {
			return fmt.Errorf("write outputs: %w", err)
		}
		return nil
	})
	if err != nil {
		return err
	}
	final := filepath.Join(outDir, env)
	old := stage + ".old"
	if err := os.Rename(final, old); err != nil && !os.IsNotExist(err) {
		return fmt.Errorf("write outputs: %w", err)
	}
	if err := os.Rename(stage, final); err != nil {
		_ = os.Rename(old, final)
		return fmt.Errorf("write outputs: %w", err)
	}
	_ = os.RemoveAll(old)
	return atomicfile.SyncDir(outDir)
}

// localName reports whether s is one local path component.
func localName(s string) bool {
	return s != "" && s != "." && filepath.IsLocal(s) && !strings.ContainsAny(s, `/\`)
}

func writeSynced(path string, data []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// CommittedRelease returns the release committed in the policy repository
// fsys for env as one release archive (root and every shard it lists, as
// Result.ManifestBytes holds it; a single-file manifest as it is), or nil
// when there is none. Only the root's release parameters are checked;
// bundle.ParseManifest checks the whole release.
func CommittedRelease(fsys fs.FS, env string) ([]byte, error) {
	c, err := readCommitted(policytree.New(fsys, policytree.Limits{}), env, true)
	if c == nil {
		return nil, err
	}
	return c.bytes, nil
}

// CommittedRoot is what the root of a committed release states of it.
type CommittedRoot struct {
	ReleaseVersion int64
	CreatedAt      string
	ReleaseDigest  string
}

// ReadCommittedRoot returns the release version, createdAt and
// releaseDigest that the committed release of env in fsys states in its
// root (the zero value when there is none), without reading a sharded
// release's shards.
func ReadCommittedRoot(fsys fs.FS, env string) (CommittedRoot, error) {
	p := ManifestPath(env)
	root, err := fs.ReadFile(policytree.New(fsys, policytree.Limits{}), p)
	if errors.Is(err, fs.ErrNotExist) {
		return CommittedRoot{}, nil
	}
	if err != nil {
		return CommittedRoot{}, fmt.Errorf("read %s: %w", p, err)
	}
	root = LF(root)
	if bundle.IsSharded(root) {
		r, err := bundle.ParseRoot(p, root)
		if err != nil {
			return CommittedRoot{}, err
		}
		return CommittedRoot{r.ReleaseVersion, r.CreatedAt, r.ReleaseDigest}, nil
	}
	m, err := bundle.ParseManifest(p, root)
	if err != nil {
		return CommittedRoot{}, err
	}
	return CommittedRoot{m.ReleaseVersion, m.CreatedAt, m.ReleaseDigest}, nil
}

// WriteReleaseFiles writes a release archive's files into the policy
// repository at repoDir (see Write) and removes the shards it does not
// list.
func WriteReleaseFiles(ctx context.Context, repoDir string, archive []byte) error {
	files, err := bundle.SplitArchive(archive)
	if err != nil {
		return err
	}
	env := strings.TrimSuffix(strings.TrimPrefix(files[0].Path, ReleasesDir+"/"), ".yaml")
	if files[0].Path != ManifestPath(env) || !localName(env) {
		return fmt.Errorf("write release manifest: %s is not a release manifest root", files[0].Path)
	}
	return writeRelease(ctx, repoDir, env, &Result{ManifestBytes: archive})
}

// sameFile reports whether path is a regular file (not a symbolic link)
// holding exactly b: a release file that need not be written again.
func sameFile(path string, b []byte) bool {
	fi, err := os.Lstat(path)
	if err != nil || !fi.Mode().IsRegular() || fi.Size() != int64(len(b)) {
		return false
	}
	old, err := os.ReadFile(path)
	return err == nil && bytes.Equal(old, b)
}
