package compiled_test

import (
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/configpub/configpub/bundle"
	"github.com/configpub/configpub/compiler"
	"github.com/configpub/configpub/internal/render"
	"github.com/configpub/configpub/registry"
	"github.com/configpub/configpub/registry/compiled"
)

func TestArtifactsOf(t *testing.T) {
	tg := compiler.Target{
		Host: "h.example", ServiceID: "svc", EnvTag: "prod", Audience: "agent",
		SnapshotID: "s", PublicationID: "p", PolicyDigest: "sha256:01", ContentDigest: "sha256:02", ArtifactDigest: "sha256:03",
		ReleaseVersion: 4, Values: []byte("v: 1\n"),
	}
	tg.Envelope.CreatedAt = "2026-08-13T14:00:00Z"
	m := &bundle.Manifest{EnvTag: "prod", ReleaseVersion: 5, CreatedAt: "2026-08-14T09:30:00Z"}
	arts, rel, err := compiled.Artifacts(&compiler.Result{Manifest: m, Targets: []compiler.Target{tg}})
	if err != nil {
		t.Fatal(err)
	}
	want := registry.Artifact{
		Host: "h.example", ServiceID: "svc", EnvTag: "prod", Audience: "agent",
		SnapshotID: "s", PublicationID: "p", PolicyDigest: "sha256:01", ContentDigest: "sha256:02", ArtifactDigest: "sha256:03",
		ReleaseVersion: 4, CreatedAt: time.Date(2026, 8, 13, 14, 0, 0, 0, time.UTC), Values: []byte("v: 1\n"),
	}
	if len(arts) != 1 || !reflect.DeepEqual(arts[0], want) {
		t.Fatalf("got %+v, want %+v", arts[0], want)
	}
	jm, err := render.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	if rel.EnvTag != "prod" || rel.ReleaseVersion != 5 || string(rel.Manifest) != string(jm) ||
		!rel.CreatedAt.Equal(time.Date(2026, 8, 14, 9, 30, 0, 0, time.UTC)) {
		t.Fatalf("got release %+v, want prod/5 with the JCS manifest and its createdAt", rel)
	}

	tg.Envelope.CreatedAt = "yesterday"
	if _, _, err := compiled.Artifacts(&compiler.Result{Manifest: m, Targets: []compiler.Target{tg}}); !errors.Is(err, registry.ErrInvalid) {
		t.Fatalf("bad target createdAt: got %v, want ErrInvalid", err)
	}
	m.CreatedAt = ""
	if _, err := compiled.Release(m); !errors.Is(err, registry.ErrInvalid) {
		t.Fatalf("bad release createdAt: got %v, want ErrInvalid", err)
	}
}
