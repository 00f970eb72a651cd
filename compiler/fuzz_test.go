package compiler_test

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"testing"
	"testing/fstest"
	"time"

	"github.com/configpub/configpub/compiler"
)

// FuzzCompileSource replaces one source document of the fixture repository
// (an Agent) with fuzzed bytes: Compile must never panic and must either
// succeed or refuse with a *SourceError or *ArtifactError.
func FuzzCompileSource(f *testing.F) {
	base := fstest.MapFS{}
	err := fs.WalkDir(os.DirFS(fixtureRepo), ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := fs.ReadFile(os.DirFS(fixtureRepo), p)
		base[p] = &fstest.MapFile{Data: b}
		return err
	})
	if err != nil {
		f.Fatal(err)
	}
	const target = "agents/advisor.yaml"
	f.Add(base[target].Data)
	f.Add([]byte("apiVersion: configpub.dev/v1\nkind: Agent\nmetadata: {name: advisor}\nspec: {}\n"))
	f.Add([]byte("apiVersion: configpub.dev/v1\nkind: Tool\nmetadata: {name: x}\nspec: {host: dev.lightapi.net}\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		repo := fstest.MapFS{}
		for k, v := range base {
			repo[k] = v
		}
		repo[target] = &fstest.MapFile{Data: data}
		_, err := compiler.Compile(context.Background(), repo, compiler.Options{EnvTag: "dev", CreatedAt: time.Date(2026, 9, 1, 0, 0, 0, 0, time.UTC)})
		if err == nil {
			return
		}
		var se *compiler.SourceError
		var ae *compiler.ArtifactError
		if !errors.As(err, &se) && !errors.As(err, &ae) {
			t.Fatalf("refusal is %T, want *SourceError or *ArtifactError: %v", err, err)
		}
	})
}
