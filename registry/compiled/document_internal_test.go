package compiled

import (
	"bytes"
	"context"
	"os"
	"testing"
	"time"

	"github.com/opencontainers/go-digest"

	"github.com/configpub/configpub/bundle"
	"github.com/configpub/configpub/compiler"
	"github.com/configpub/configpub/internal/gen"
	"github.com/configpub/configpub/internal/render"
)

// releaseDocument is the release artifact's layer as a Go value, the form
// appendReleaseDocument writes directly.
type releaseDocument struct {
	APIVersion     string        `json:"apiVersion"`
	Kind           string        `json:"kind"`
	EnvTag         string        `json:"envTag"`
	ReleaseVersion int64         `json:"releaseVersion"`
	ReleaseDigest  string        `json:"releaseDigest"`
	Files          []releaseFile `json:"files"`
}

type releaseFile struct {
	Path    string `json:"path"`
	Digest  string `json:"digest"`
	Content string `json:"content"`
}

// TestReleaseDocumentIsCanonical: the release document written directly is
// byte for byte render.Marshal (RFC 8785) of the same document, for a
// generated release (quotes, newlines and a non-ASCII file added) and for
// the fixture's, so published release artifacts keep their digests.
func TestReleaseDocumentIsCanonical(t *testing.T) {
	repo := gen.Repo(gen.Options{Targets: 30, AgentsPerHost: 10, EnvTag: "bench"})
	res, err := compiler.Compile(context.Background(), repo, compiler.Options{EnvTag: "bench", CreatedAt: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), ManifestOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	gen, err := bundle.SplitArchive(res.ManifestBytes)
	if err != nil {
		t.Fatal(err)
	}
	fixture, err := compiler.CommittedRelease(os.DirFS("../../fixtures/policy-repo"), "dev")
	if err != nil {
		t.Fatal(err)
	}
	fix, err := bundle.SplitArchive(fixture)
	if err != nil {
		t.Fatal(err)
	}
	odd := append(append([]bundle.ReleaseFile{}, gen...), bundle.ReleaseFile{Path: "releases/bench/x.yaml",
		Bytes: []byte("a: \"quoted\" \\ back\tslash\r\n\x01 — née ✓ 𝄞\n")})
	for name, files := range map[string][]bundle.ReleaseFile{"generated": gen, "fixture": fix, "odd": odd} {
		root, err := bundle.ParseRoot(files[0].Path, files[0].Bytes)
		if err != nil {
			t.Fatal(err)
		}
		doc := releaseDocument{APIVersion: root.APIVersion, Kind: root.Kind, EnvTag: root.EnvTag, ReleaseVersion: root.ReleaseVersion, ReleaseDigest: root.ReleaseDigest}
		for _, f := range files {
			doc.Files = append(doc.Files, releaseFile{Path: f.Path, Digest: render.BytesDigest(f.Bytes), Content: string(f.Bytes)})
		}
		want, err := render.Marshal(doc)
		if err != nil {
			t.Fatal(err)
		}
		got, err := appendReleaseDocument(nil, &root.ReleaseHeader, root.ReleaseDigest, files)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			n := 0
			for n < len(got) && n < len(want) && got[n] == want[n] {
				n++
			}
			t.Errorf("%s: written document differs from render.Marshal at byte %d of %d/%d: %.80q vs %.80q", name, n, len(got), len(want), got[n:], want[n:])
		}
		// Named by its digest, the document is hashed as it is written,
		// not held: the same digest and size.
		ref, err := releaseByDigest(&root.ReleaseHeader, root.ReleaseDigest, each(files))
		if err != nil {
			t.Fatal(err)
		}
		if ref.Manifest != nil || ref.ManifestDigest != digest.FromBytes(want) || ref.ManifestSize != int64(len(want)) {
			t.Errorf("%s: release named by digest: %d bytes held, %s (%d bytes); want none held, %s (%d bytes)",
				name, len(ref.Manifest), ref.ManifestDigest, ref.ManifestSize, digest.FromBytes(want), len(want))
		}
	}
	if _, err := appendReleaseDocument(nil, &bundle.ReleaseHeader{}, "", []bundle.ReleaseFile{{Path: "p", Bytes: []byte{0xff}}}); err == nil {
		t.Error("a file that is not UTF-8 was written into the release document")
	}
	if _, err := releaseByDigest(&bundle.ReleaseHeader{CreatedAt: "2026-01-01T00:00:00Z"}, "", each([]bundle.ReleaseFile{{Path: "p", Bytes: []byte{0xff}}})); err == nil {
		t.Error("a file that is not UTF-8 was hashed into the release document's digest")
	}
}
