package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/go-git/go-git/v5"

	"github.com/configpub/configpub/internal/cosignkey"
	"github.com/configpub/configpub/internal/registrytest"
)

// publisher returns a function that runs publish, with extra arguments,
// on the dev release of a copy of the fixture policy repository, to one
// in-process registry with one new cosign key; the registry prefix and the
// cosign.pub path.
func publisher(t *testing.T) (publish func(extra ...string) string, prefix, keyPub, repo string) {
	t.Helper()
	reg := registrytest.New(t, registrytest.Options{})
	t.Setenv(cosignkey.PasswordEnv, "pw")
	kp, err := cosignkey.GenerateKeyPair([]byte("pw"))
	if err != nil {
		t.Fatal(err)
	}
	keyPath, pubPath, err := cosignkey.WriteKeyPair(t.TempDir(), kp)
	if err != nil {
		t.Fatal(err)
	}
	repo = copyDir(t, "../../fixtures/policy-repo")
	prefix = reg.Host + "/configpub"
	return func(extra ...string) string {
		t.Helper()
		out, err := runCLI(append([]string{"publish", "--repo", repo, "--env", "dev", "--registry", prefix,
			"--key", keyPath, "--plain-http"}, extra...)...)
		if err != nil {
			t.Fatalf("publish %v: %v\n%s", extra, err, out)
		}
		return out
	}, prefix, pubPath, repo
}

// publishFixture publishes the dev release of the fixture policy repository
// to an in-process registry and returns the cosign.pub path and publish's
// output.
func publishFixture(t *testing.T, extra ...string) (keyPub, out string) {
	t.Helper()
	publish, _, pub, _ := publisher(t)
	return pub, publish(extra...)
}

// TestPublishPrintsPasteableReferences: every reference publish prints
// (one per artifact, and the release artifact) is accepted as printed by
// pull and verify-oci against the registry it was published to.
func TestPublishPrintsPasteableReferences(t *testing.T) {
	pub, out := publishFixture(t)
	var refs []string
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		switch {
		case len(f) >= 2 && (f[0] == "pushed" || f[0] == "present"):
			refs = append(refs, f[1])
		case strings.HasPrefix(line, "release artifact: "):
			refs = append(refs, strings.TrimPrefix(line, "release artifact: "))
		}
	}
	if len(refs) < 3 || !strings.Contains(out, "release artifact: ") {
		t.Fatalf("publish printed %d references:\n%s", len(refs), out)
	}
	for _, ref := range refs {
		file := filepath.Join(t.TempDir(), "layer")
		if o, err := runCLI("pull", ref, "--out", file, "--plain-http"); err != nil {
			t.Fatalf("pull %s: %v\n%s", ref, err, o)
		}
		if b, err := os.ReadFile(file); err != nil || len(b) == 0 {
			t.Fatalf("pull %s wrote %d bytes: %v", ref, len(b), err)
		}
		o, err := runCLI("verify-oci", ref, "--trust-key", pub, "--plain-http")
		if err != nil || !strings.Contains(o, "verified "+ref) {
			t.Fatalf("verify-oci %s: %v\n%s", ref, err, o)
		}
	}
}

// TestRegistryVerbsOutputJSON: publish, pull, verify-oci and validate with
// -o json print one JSON document with the documented field names (decoded
// here into structs of their own, so a renamed field fails), publish's refs
// feed pull and verify-oci, and a pulled values artifact validates.
func TestRegistryVerbsOutputJSON(t *testing.T) {
	pub, out := publishFixture(t, "-o", "json")
	var p struct {
		EnvTag          string `json:"envTag"`
		Release         int64  `json:"release"`
		Registry        string `json:"registry"`
		KeyID           string `json:"keyId"`
		ReleaseArtifact string `json:"releaseArtifact"`
		Compiled        bool   `json:"compiled"`
		Pushed          int    `json:"pushed"`
		AlreadyPresent  int    `json:"alreadyPresent"`
		BytesUploaded   int64  `json:"bytesUploaded"`
		Artifacts       []struct {
			Kind          string `json:"kind"`
			Ref           string `json:"ref"`
			Tag           string `json:"tag"`
			Pushed        bool   `json:"pushed"`
			BytesUploaded int64  `json:"bytesUploaded"`
		} `json:"artifacts"`
	}
	decodeStrict(t, out, &p)
	if p.EnvTag != "dev" || p.Release != 1 || !p.Compiled || p.Pushed != len(p.Artifacts) || len(p.Artifacts) < 2 || !strings.Contains(p.ReleaseArtifact, "/dev/release@sha256:") {
		t.Fatalf("publish -o json: %+v", p)
	}
	values := 0
	for _, a := range p.Artifacts {
		file := filepath.Join(t.TempDir(), "values.yml")
		o, err := runCLI("pull", a.Ref, "--out", file, "--plain-http", "-o", "json")
		if err != nil {
			t.Fatalf("pull %s: %v\n%s", a.Ref, err, o)
		}
		var pl struct {
			Ref         string `json:"ref"`
			LayerDigest string `json:"layerDigest"`
			Bytes       int    `json:"bytes"`
			Out         string `json:"out"`
		}
		decodeStrict(t, o, &pl)
		if b, _ := os.ReadFile(file); pl.Ref != a.Ref || pl.Out != file || pl.Bytes != len(b) || !strings.HasPrefix(pl.LayerDigest, "sha256:") {
			t.Fatalf("pull -o json: %+v (file %d bytes)", pl, len(b))
		}
		o, err = runCLI("verify-oci", a.Ref, "--trust-key", pub, "--plain-http", "-o", "json")
		if err != nil {
			t.Fatalf("verify-oci %s: %v\n%s", a.Ref, err, o)
		}
		var v struct {
			Ref         string `json:"ref"`
			Kind        string `json:"kind"`
			KeyID       string `json:"keyId"`
			LayerDigest string `json:"layerDigest"`
			Target      *struct {
				EnvTag         string `json:"envTag"`
				Host           string `json:"host"`
				ServiceID      string `json:"serviceId"`
				Audience       string `json:"audience"`
				SnapshotID     string `json:"snapshotId"`
				Release        int64  `json:"release"`
				ArtifactDigest string `json:"artifactDigest"`
			} `json:"target"`
		}
		decodeStrict(t, o, &v)
		if v.Ref != a.Ref || v.Kind != a.Kind || v.KeyID == "" || v.LayerDigest != pl.LayerDigest || (a.Kind == "values") != (v.Target != nil) {
			t.Fatalf("verify-oci -o json for %+v: %+v", a, v)
		}
		if a.Kind != "values" {
			continue
		}
		values++
		o, err = runCLI("validate", file, "-o", "json")
		if err != nil {
			t.Fatalf("validate %s: %v\n%s", a.Ref, err, o)
		}
		var vr struct {
			File           string `json:"file"`
			Valid          bool   `json:"valid"`
			Audience       string `json:"audience"`
			Host           string `json:"host"`
			ServiceID      string `json:"serviceId"`
			EnvTag         string `json:"envTag"`
			PublicationID  string `json:"publicationId"`
			Release        int64  `json:"release"`
			ContentDigest  string `json:"contentDigest"`
			ArtifactDigest string `json:"artifactDigest"`
			PropSetDigest  string `json:"propertySetDigest"`
			NotChecked     string `json:"notChecked"`
		}
		decodeStrict(t, o, &vr)
		if !vr.Valid || vr.File != file || vr.Host != v.Target.Host || vr.ServiceID != v.Target.ServiceID || vr.Audience != v.Target.Audience ||
			vr.Release != 1 || vr.ArtifactDigest != v.Target.ArtifactDigest || vr.PublicationID == "" || vr.ContentDigest == "" {
			t.Fatalf("validate -o json: %+v; verify-oci said %+v", vr, *v.Target)
		}
	}
	if values == 0 {
		t.Fatal("no values artifact published")
	}
}

// decodeStrict decodes out as exactly one JSON document with no field
// that v does not name.
func decodeStrict(t *testing.T, out string, v any) {
	t.Helper()
	dec := json.NewDecoder(strings.NewReader(out))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		t.Fatalf("not the documented JSON (%v):\n%s", err, out)
	}
	if dec.More() {
		t.Fatalf("more than one JSON document:\n%s", out)
	}
}

// TestRepublishStopsAtTheReleaseArtifact: publishing a release again finds
// its release artifact in place from the committed files and stops there,
// compiling nothing, and says so (text and -o json); with --out it compiles
// (the targets are needed) and then stops at the release artifact;
// --recheck checks every artifact and finds them all present. A source
// edited after the publication is not compiled by a plain re-publish (the
// committed release is published); --recheck compiles and refuses it.
func TestRepublishStopsAtTheReleaseArtifact(t *testing.T) {
	publish, prefix, keyPub, repo := publisher(t)
	first := publish()
	m := regexp.MustCompile(`: (\d+) artifacts published to .*: (\d+) pushed, 0 already present`).FindStringSubmatch(first)
	if m == nil || m[1] != m[2] {
		t.Fatalf("first publish did not push every artifact:\n%s", first)
	}
	rel := regexp.MustCompile(`release artifact: (\S+)`).FindStringSubmatch(first)
	again := publish()
	if !strings.Contains(again, "release dev/1 is already published to "+prefix+": "+rel[1]+" (found from the committed release's files: nothing compiled") ||
		strings.Contains(again, "present ") {
		t.Fatalf("re-publish did not stop at the release artifact %s before compiling:\n%s", rel[1], again)
	}
	type report struct {
		AlreadyPublished bool   `json:"alreadyPublished"`
		Compiled         bool   `json:"compiled"`
		ReleaseArtifact  string `json:"releaseArtifact"`
		AlreadyPresent   int    `json:"alreadyPresent"`
	}
	var rep report
	if err := json.Unmarshal([]byte(publish("-o", "json")), &rep); err != nil || !rep.AlreadyPublished || rep.Compiled || rep.ReleaseArtifact != rel[1] || rep.AlreadyPresent != 1 {
		t.Fatalf("re-publish -o json: %+v, %v", rep, err)
	}
	out := t.TempDir()
	rep = report{}
	if err := json.Unmarshal([]byte(publish("-o", "json", "--out", out)), &rep); err != nil || !rep.AlreadyPublished || !rep.Compiled || rep.ReleaseArtifact != rel[1] {
		t.Fatalf("re-publish --out -o json: %+v, %v", rep, err)
	}
	if vs, _ := filepath.Glob(filepath.Join(out, "dev", "*", "*", "values.yml")); len(vs) == 0 {
		t.Fatalf("re-publish --out wrote no values.yml under %s", out)
	}
	checked := publish("--recheck")
	if !strings.Contains(checked, ": 0 pushed, "+m[1]+" already present, 0 bytes uploaded") {
		t.Fatalf("--recheck did not check every artifact:\n%s", checked)
	}
	// A source changed after the publication, the release not recompiled.
	agent := filepath.Join(repo, "agents", "advisor.yaml")
	b, err := os.ReadFile(agent)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(agent, append(b, []byte("# edited after the publication\n")...), 0o644); err != nil {
		t.Fatal(err)
	}
	if again := publish(); !strings.Contains(again, "release dev/1 is already published to ") {
		t.Fatalf("re-publish of the committed release with an edited source:\n%s", again)
	}
	if out, err := runCLI("publish", "--repo", repo, "--env", "dev", "--registry", prefix,
		"--key", filepath.Join(filepath.Dir(keyPub), cosignkey.PrivateKeyFile), "--plain-http", "--recheck"); err == nil ||
		!strings.Contains(out+err.Error(), "stale") || !strings.Contains(err.Error(), "but the sources derive") {
		t.Fatalf("--recheck with an edited source: %v\n%s; want the stale release refused, its first difference named", err, out)
	}
}

// TestPublishNamesTheEditedSources: publish refuses a stale release as
// compile --check does, naming the sources edited since the commit that
// introduced the release (it said only 'releaseDigest is …').
func TestPublishNamesTheEditedSources(t *testing.T) {
	_, prefix, keyPub, repo := publisher(t)
	r, err := git.PlainInit(repo, false)
	if err != nil {
		t.Fatal(err)
	}
	commitAll(t, r, "fixture", time.Date(2026, 10, 1, 9, 30, 0, 0, time.UTC))
	agent := filepath.Join(repo, "agents", "advisor.yaml")
	b, err := os.ReadFile(agent)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(agent, append(b, "# reviewed\n"...), 0o644); err != nil {
		t.Fatal(err)
	}
	commitAll(t, r, "a comment", time.Date(2026, 10, 2, 0, 0, 0, 0, time.UTC))
	out, err := runCLI("publish", "--repo", repo, "--env", "dev", "--registry", prefix,
		"--key", filepath.Join(filepath.Dir(keyPub), cosignkey.PrivateKeyFile), "--plain-http")
	if want := "sources edited since release 1 was compiled: agents/advisor.yaml; no target's values changed"; err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("got %v\n%s; want it to contain %q", err, out, want)
	}
}
