package compiler_test

import (
	"bytes"
	"context"
	"os"
	"testing"
	"time"

	"github.com/configpub/configpub/compiler"
)

const fixtureRepo = "../fixtures/policy-repo"

var envs = []string{"dev", "prod"}

func compileFixture(t *testing.T, env string) *compiler.Result {
	t.Helper()
	res, err := compiler.Compile(context.Background(), os.DirFS(fixtureRepo), compiler.Options{EnvTag: env})
	if err != nil {
		t.Fatalf("compile %s: %v", env, err)
	}
	return res
}

func TestCompileReproducesCommittedManifest(t *testing.T) {
	for _, env := range envs {
		t.Run(env, func(t *testing.T) {
			res := compileFixture(t, env)
			if !res.UpToDate {
				t.Fatalf("UpToDate = false, want true: %v", res.Stale())
			}
			if err := res.Stale(); err != nil {
				t.Fatalf("Stale() = %v, want nil", err)
			}
			want, err := compiler.CommittedRelease(os.DirFS(fixtureRepo), env)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(res.ManifestBytes, want) {
				t.Fatalf("manifest bytes differ from the committed file")
			}
			if got := len(res.Targets); got != 5 {
				t.Fatalf("got %d targets, want 5", got)
			}
			for _, tg := range res.Targets {
				if tg.ArtifactDigest != res.Manifest.Target(tg.Host, tg.ServiceID).ArtifactDigest {
					t.Errorf("%s: artifact digest differs from the manifest", tg.ServiceID)
				}
			}
		})
	}
}

func TestCompileNewReleaseOnChange(t *testing.T) {
	dir := copyRepo(t)
	h := newHistory(t, dir)
	first := h.compile(t, time.Time{})
	edit(t, dir+"/agents/account.yaml", "maxOutputTokens: 4096", "maxOutputTokens: 4000")
	created := time.Date(2026, 9, 1, 10, 0, 0, 0, time.UTC)
	res, err := h.try(created)
	if err != nil {
		t.Fatal(err)
	}
	if res.UpToDate {
		t.Fatal("UpToDate = true after a source edit")
	}
	if got, want := res.Manifest.ReleaseVersion, int64(2); got != want {
		t.Fatalf("releaseVersion = %d, want %d", got, want)
	}
	changed := map[string]bool{}
	for _, tg := range res.Targets {
		changed[tg.ServiceID] = tg.Changed
		base := first.Manifest.Target(tg.Host, tg.ServiceID)
		if !tg.Changed {
			if tg.ArtifactDigest != base.ArtifactDigest || tg.SnapshotID != base.SnapshotID || tg.ReleaseVersion != 1 {
				t.Errorf("%s unchanged but its snapshot differs from the base", tg.ServiceID)
			}
			continue
		}
		if tg.ReleaseVersion != 2 || tg.Envelope.CreatedAt != "2026-09-01T10:00:00Z" {
			t.Errorf("%s: releaseVersion %d createdAt %s, want 2 and 2026-09-01T10:00:00Z", tg.ServiceID, tg.ReleaseVersion, tg.Envelope.CreatedAt)
		}
	}
	want := map[string]bool{
		"com.networknt.agent-account-1.0.0":      true,
		"com.networknt.agent-advisor-1.0.0":      false,
		"com.networknt.agent-tech-support-1.0.0": false,
		"com.networknt.light-gateway-1.0.0":      true,
		"com.networknt.knowledge-1.0.0":          true,
	}
	for svc, w := range want {
		if changed[svc] != w {
			t.Errorf("%s changed = %v, want %v", svc, changed[svc], w)
		}
	}
	// Writing the new manifest and compiling again reproduces it.
	if err := compiler.Write(context.Background(), res, dir, ""); err != nil {
		t.Fatal(err)
	}
	again, err := h.try(time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	if !again.UpToDate || !bytes.Equal(again.ManifestBytes, res.ManifestBytes) {
		t.Fatalf("recompile of release 2 is not byte-identical: %v", again.Stale())
	}
}
