package compiler_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/configpub/configpub/compiler"
)

func TestErrorsReportedTogetherWithSuggestions(t *testing.T) {
	opts := compiler.Options{EnvTag: "dev", CreatedAt: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	dir := copyRepo(t)
	edit(t, filepath.Join(dir, "agents/account.yaml"), "    temperature: 0.2\n", "    temprature: 0.2\n")
	edit(t, filepath.Join(dir, "hosts/dev.lightapi.net.yaml"), "  owner: platform-team\n", "  ownr: platform-team\n")
	edit(t, filepath.Join(dir, "models/chat-default.yaml"), "  contextWindow: 128000\n", "")
	_, err := compiler.Compile(context.Background(), os.DirFS(dir), opts)
	var all *compiler.SourceErrors
	if !errors.As(err, &all) {
		t.Fatalf("got %T %v, want *compiler.SourceErrors", err, err)
	}
	if !errors.Is(err, compiler.ErrInvalidSource) {
		t.Error("errors.Is(err, ErrInvalidSource) = false")
	}
	msg := err.Error()
	for _, want := range []string{
		`agents/account.yaml:19: spec.model.temprature: unknown field (did you mean "temperature"?)`,
		`hosts/dev.lightapi.net.yaml:7: spec.ownr: unknown field (did you mean "owner"?)`,
		`models/chat-default.yaml:5: spec.contextWindow: missing required property`,
	} {
		if !strings.Contains(msg, want) {
			t.Errorf("message does not contain %q:\n%s", want, msg)
		}
	}
	if got := len(all.Errs); got < 4 {
		t.Errorf("got %d problems, want at least 4 (typo, missing owner, unknown ownr, missing contextWindow):\n%s", got, msg)
	}

	// References: a near name is suggested.
	dir = copyRepo(t)
	edit(t, filepath.Join(dir, "agents/account.yaml"), "    alias: chat-default\n", "    alias: chat-defualt\n")
	_, err = compiler.Compile(context.Background(), os.DirFS(dir), opts)
	if err == nil || !strings.Contains(err.Error(), `unresolved reference: ModelAlias "chat-defualt" is not defined (did you mean "chat-default"?)`) {
		t.Errorf("got %v, want an unresolved reference with a suggestion", err)
	}

	// Bounded: many broken files list MaxReported problems and count the rest.
	dir = copyRepo(t)
	if err := os.Mkdir(filepath.Join(dir, "extra"), 0o755); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < compiler.MaxReported+5; i++ {
		writeFile(t, filepath.Join(dir, "extra", fmt.Sprintf("x%02d.yaml", i)), "apiVersion: configpub.dev/v1\nkind: Nope\n")
	}
	_, err = compiler.Compile(context.Background(), os.DirFS(dir), opts)
	if !errors.As(err, &all) || len(all.Errs) != compiler.MaxReported || all.Omitted != 5 || !strings.Contains(err.Error(), "and 5 more") {
		t.Fatalf("got %v, want %d listed and 5 omitted", err, compiler.MaxReported)
	}
}

// TestNoRepositoryDocument: a directory without configpub.yaml (a
// subdirectory of the policy repository, say) is not the root, and the
// error says so rather than pointing at a missing file's first line.
func TestNoRepositoryDocument(t *testing.T) {
	opts := compiler.Options{EnvTag: "dev", CreatedAt: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	dir := copyRepo(t)
	_, err := compiler.Compile(context.Background(), os.DirFS(filepath.Join(dir, "agents")), opts)
	if !errors.Is(err, compiler.ErrInvalidSource) || !strings.Contains(fmt.Sprint(err), "no configpub.yaml: the directory compiled must be the policy repository's root") {
		t.Fatalf("compile of agents/: got %v", err)
	}
}

// TestSourceErrorShowsTheFileNameEscaped: a SourceError (and the yamlstrict
// refusal it is made from) prints its file name and field escaped, so a
// name holding a newline cannot start a line of its own, whoever prints it.
func TestSourceErrorShowsTheFileNameEscaped(t *testing.T) {
	const want = `agents/x\n::error title=PWN::ok.yaml:3: spec.a\u202eb: bad`
	err := &compiler.SourceError{File: "agents/x\n::error title=PWN::ok.yaml", Line: 3, Field: "spec.a\u202eb", Err: errors.New("bad")}
	if got := err.Error(); got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}

// TestATargetOfNoEnvironmentIsRefused: a Target whose envTag names no
// Environment document (a typo: dve) is refused at its envTag, whichever
// environment is compiled, suggesting the closest one — it was skipped, and
// the compile said "0 targets change". A Target of another environment
// that exists (the fixture's prod targets, compiling dev) is skipped.
func TestATargetOfNoEnvironmentIsRefused(t *testing.T) {
	for _, c := range []struct{ envTag, want string }{
		{"dve", `targets/dev/account.yaml:8: spec.envTag: no Environment document defines envTag "dve" (did you mean "dev"?)`},
		{"staging", `targets/dev/account.yaml:8: spec.envTag: no Environment document defines envTag "staging" (add environments/staging.yaml)`},
	} {
		dir := copyRepo(t)
		edit(t, filepath.Join(dir, "targets/dev/account.yaml"), "  envTag: dev\n", "  envTag: "+c.envTag+"\n")
		for _, env := range []string{"dev", "prod"} {
			opts := compiler.Options{EnvTag: env, CreatedAt: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
			_, err := compiler.Compile(context.Background(), os.DirFS(dir), opts)
			if !errors.Is(err, compiler.ErrInvalidSource) || !strings.Contains(fmt.Sprint(err), c.want) {
				t.Errorf("envTag %s, compiling %s: got %v, want %s", c.envTag, env, err, c.want)
			}
		}
	}
	opts := compiler.Options{EnvTag: "dev", CreatedAt: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	if _, err := compiler.Compile(context.Background(), os.DirFS(copyRepo(t)), opts); err != nil {
		t.Fatalf("the fixture, with prod targets, compiling dev: %v", err)
	}
}

// TestIgnoredFilesAreNotSources: a file Options.Ignored reports is not
// read (it would be refused) and is listed in Result.Ignored; when the
// compile fails, the error says which files were left out (what they
// defined may be what is missing).
func TestIgnoredFilesAreNotSources(t *testing.T) {
	dir := copyRepo(t)
	if err := os.WriteFile(filepath.Join(dir, "scratch.yaml"), []byte("not: [a source\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	opts := compiler.Options{EnvTag: "dev", CheckOnly: true, Ignored: func(p string, _ bool) bool { return p == "scratch.yaml" }}
	res, err := compiler.Compile(context.Background(), os.DirFS(dir), opts)
	if err != nil || strings.Join(res.Ignored, ",") != "scratch.yaml" {
		t.Fatalf("got %v, %v; want scratch.yaml left out", res, err)
	}
	opts.Ignored = func(p string, _ bool) bool { return p == "scratch.yaml" || p == "agents/advisor.yaml" }
	_, err = compiler.Compile(context.Background(), os.DirFS(dir), opts)
	if !errors.Is(err, compiler.ErrInvalidSource) || !strings.Contains(err.Error(), `Agent "advisor" is not defined`) ||
		!strings.HasSuffix(err.Error(), "\n(ignored by Git: not compiled: a release is compiled from what is committed: agents/advisor.yaml, scratch.yaml)") {
		t.Fatalf("got %v, want the unresolved Agent and the files left out", err)
	}
}
