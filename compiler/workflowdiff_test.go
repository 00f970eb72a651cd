package compiler_test

import (
	"bytes"
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	"github.com/configpub/configpub/compiler"
	"github.com/configpub/configpub/fixtures"
)

// TestWorkflowDiffGolden compares the fixture's account-onboarding 1.0.0
// (PUBLISHED) and 1.1.0 (DRAFT) side by side; -update rewrites the golden
// file.
func TestWorkflowDiffGolden(t *testing.T) {
	fsys, err := fixtures.PolicyRepo()
	if err != nil {
		t.Fatal(err)
	}
	golden := filepath.Join("testdata", "workflow-diff", "account-onboarding-1.0.0-1.1.0.txt")
	for _, wf := range []string{"3f0c9a52-7d1e-4b8a-9c61-2f5e8d4b7a10", "account-onboarding"} {
		d, err := compiler.DiffWorkflowVersions(context.Background(), fsys, nil, wf, "1.0.0", "1.1.0")
		if err != nil {
			t.Fatal(err)
		}
		var buf bytes.Buffer
		if err := d.WriteSideBySide(&buf); err != nil {
			t.Fatal(err)
		}
		if *update {
			if err := os.MkdirAll(filepath.Dir(golden), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(golden, buf.Bytes(), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		want, err := os.ReadFile(golden)
		if err != nil {
			t.Fatalf("%v (run go test ./compiler -run TestWorkflowDiffGolden -update)", err)
		}
		if !bytes.Equal(buf.Bytes(), want) {
			t.Fatalf("workflow diff %s differs from %s:\n%s", wf, golden, buf.String())
		}
	}
	// A version missing from the sources (deleted since it was published,
	// say) is named with those the sources have: the message said only
	// `no version "9.9.9"`.
	if _, err := compiler.DiffWorkflowVersions(context.Background(), fsys, nil, "account-onboarding", "9.9.9", "1.1.0"); err == nil ||
		!strings.Contains(err.Error(), `no version "9.9.9" in the sources (they have 1.0.0, 1.1.0)`) || !strings.Contains(err.Error(), "workflowLedger") {
		t.Errorf("diff of a version the sources lack: %v, want it named with the versions they have and where a deleted one is", err)
	}
	for _, bad := range [][3]string{{"no-such-workflow", "1.0.0", "1.1.0"}, {"account-onboarding", "1.0.0", "9.9.9"}} {
		if _, err := compiler.DiffWorkflowVersions(context.Background(), fsys, nil, bad[0], bad[1], bad[2]); err == nil ||
			!strings.Contains(err.Error(), bad[0]) && !strings.Contains(err.Error(), bad[2]) {
			t.Errorf("diff %v: got %v, want an error naming it", bad, err)
		}
	}
}

// TestAddedWorkflowVersions adds version 1.2.0 to account-onboarding: the
// plan diff shows it against 1.1.0, and nothing else.
func TestAddedWorkflowVersions(t *testing.T) {
	base, err := fixtures.PolicyRepo()
	if err != nil {
		t.Fatal(err)
	}
	head := fstest.MapFS{}
	if err := copyInto(head, base); err != nil {
		t.Fatal(err)
	}
	p := "workflows/account-onboarding.yaml"
	src := string(head[p].Data)
	i := strings.Index(src, "    - version: 1.1.0")
	added := strings.Replace(src[i:], "version: 1.1.0", "version: 1.2.0", 1)
	added = strings.Replace(added, "retries: 3", "retries: 2", 1)
	head[p] = &fstest.MapFile{Data: []byte(src + added)}
	compile := func(fsys fs.FS) *compiler.Result {
		t.Helper()
		res, err := compiler.Compile(context.Background(), fsys, compiler.Options{EnvTag: "dev",
			CreatedAt: time.Date(2026, 9, 1, 0, 0, 0, 0, time.UTC), ManifestOnly: true})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	baseRes, headRes := compile(base), compile(head)
	ds, err := compiler.AddedWorkflowVersions(baseRes, headRes)
	if err != nil {
		t.Fatal(err)
	}
	if len(ds) != 1 || ds[0].Old == nil || ds[0].Old.Version != "1.1.0" || ds[0].New.Version != "1.2.0" {
		t.Fatalf("added versions: %+v, want 1.1.0 -> 1.2.0", ds)
	}
	var buf bytes.Buffer
	if err := ds[0].WriteSideBySide(&buf); err != nil {
		t.Fatal(err)
	}
	var changed []string
	for _, l := range strings.Split(buf.String(), "\n") {
		if strings.Contains(l, " | ") {
			changed = append(changed, strings.Join(strings.Fields(l), " "))
		}
	}
	if strings.Join(changed, "\n") != "retries: 3 | retries: 2\nversion: \"1.1.0\" | version: \"1.2.0\"" {
		t.Fatalf("changed rows:\n%s\nin\n%s", strings.Join(changed, "\n"), buf.String())
	}
	if ds, err := compiler.AddedWorkflowVersions(baseRes, baseRes); err != nil || len(ds) != 0 {
		t.Fatalf("same tree: %v, %v", ds, err)
	}
	// Without a base every version is added, each against the one before.
	ds, err = compiler.AddedWorkflowVersions(nil, headRes)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, d := range ds {
		old := "-"
		if d.Old != nil {
			old = d.Old.Version
		}
		got = append(got, d.Workflow+" "+old+" -> "+d.New.Version)
	}
	if want := "account-onboarding - -> 1.0.0\naccount-onboarding 1.0.0 -> 1.1.0\naccount-onboarding 1.1.0 -> 1.2.0\ndevice-reset - -> 2.0.0"; strings.Join(got, "\n") != want {
		t.Fatalf("versions added to no base:\n%s\nwant\n%s", strings.Join(got, "\n"), want)
	}
	if _, err := compiler.AddedWorkflowVersions(nil, &compiler.Result{}); err == nil {
		t.Fatal("a result without its Workflow documents: no error")
	}
}

func copyInto(dst fstest.MapFS, src fs.FS) error {
	return fs.WalkDir(src, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := fs.ReadFile(src, p)
		dst[p] = &fstest.MapFile{Data: b}
		return err
	})
}
