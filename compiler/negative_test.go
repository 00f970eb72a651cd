package compiler_test

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	yaml "gopkg.in/yaml.v3"

	"github.com/configpub/configpub/compiler"
)

const negativeDir = "../fixtures/negative"

// negativeCase is fixtures/negative/NAME/expect.yaml.
type negativeCase struct {
	Env      string `yaml:"env"`      // compile cases: the environment compiled
	Validate string `yaml:"validate"` // validate cases: the values.yml checked
	Audience string `yaml:"audience"`
	File     string `yaml:"file"`
	Line     int    `yaml:"line"`
	Field    string `yaml:"field"`
	Error    string `yaml:"error"`   // substring of the message
	Missing  int    `yaml:"missing"` // validate cases: listed missing properties
	Omitted  int    `yaml:"omitted"` // validate cases: "and N more"
	Secret   string `yaml:"secret"`  // must not appear in the message
}

func loadNegative(t *testing.T) map[string]negativeCase {
	t.Helper()
	dirs, err := os.ReadDir(negativeDir)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]negativeCase{}
	for _, d := range dirs {
		if !d.IsDir() {
			continue
		}
		b, err := os.ReadFile(filepath.Join(negativeDir, d.Name(), "expect.yaml"))
		if err != nil {
			t.Fatalf("%s: %v", d.Name(), err)
		}
		var c negativeCase
		if err := yaml.Unmarshal(b, &c); err != nil {
			t.Fatalf("%s: %v", d.Name(), err)
		}
		out[d.Name()] = c
	}
	return out
}

// overlay copies fixtures/negative/NAME/overlay over a fresh copy of the
// fixture policy repository.
func overlay(t *testing.T, name string) string {
	t.Helper()
	dir := copyRepo(t)
	src := filepath.Join(negativeDir, name, "overlay")
	err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		dst := filepath.Join(dir, rel)
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			return err
		}
		return os.WriteFile(dst, b, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

func TestNegativeFixtures(t *testing.T) {
	for name, c := range loadNegative(t) {
		t.Run(name, func(t *testing.T) {
			if c.Validate != "" {
				checkNegativeValidate(t, name, c)
				return
			}
			dir := overlay(t, name)
			manifestBefore, _ := os.ReadFile(filepath.Join(dir, "releases", c.Env+".yaml"))
			out := filepath.Join(t.TempDir(), "out")
			var ms0, ms1 runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&ms0)
			start := time.Now()
			res, err := compiler.Compile(context.Background(), os.DirFS(dir), compiler.Options{EnvTag: c.Env, CreatedAt: time.Date(2026, 9, 1, 0, 0, 0, 0, time.UTC)})
			elapsed := time.Since(start)
			runtime.ReadMemStats(&ms1)
			if err == nil {
				// What the CLI does on success; a negative case must never get here.
				_ = compiler.Write(context.Background(), res, dir, out)
				t.Fatalf("compile succeeded, want %q", c.Error)
			}
			var se *compiler.SourceError
			if !errors.As(err, &se) {
				t.Fatalf("got %T %v, want *compiler.SourceError", err, err)
			}
			if se.File != c.File || se.Line != c.Line || se.Field != c.Field {
				t.Errorf("got %s:%d: %s, want %s:%d: %s (%v)", se.File, se.Line, se.Field, c.File, c.Line, c.Field, err)
			}
			if !strings.Contains(err.Error(), c.Error) {
				t.Errorf("got %q, want it to contain %q", err, c.Error)
			}
			if c.Secret != "" && strings.Contains(err.Error(), c.Secret) {
				t.Errorf("error message reveals the secret value: %q", err)
			}
			if !errors.Is(err, compiler.ErrInvalidSource) {
				t.Errorf("errors.Is(err, ErrInvalidSource) = false")
			}
			if elapsed > 5*time.Second {
				t.Errorf("refusal took %v, want a bounded time", elapsed)
			}
			if alloc := ms1.TotalAlloc - ms0.TotalAlloc; alloc > 256<<20 {
				t.Errorf("refusal allocated %d MiB, want bounded memory", alloc>>20)
			}
			// Nothing written on failure.
			if _, err := os.Stat(out); !os.IsNotExist(err) {
				t.Errorf("output directory exists after a refusal")
			}
			after, _ := os.ReadFile(filepath.Join(dir, "releases", c.Env+".yaml"))
			if string(after) != string(manifestBefore) {
				t.Errorf("release manifest changed after a refusal")
			}
		})
	}
}

func checkNegativeValidate(t *testing.T, name string, c negativeCase) {
	p := filepath.Join(negativeDir, name, c.Validate)
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	_, err = compiler.ValidateArtifact(c.Validate, b, c.Audience)
	var ae *compiler.ArtifactError
	if !errors.As(err, &ae) {
		t.Fatalf("got %v, want *compiler.ArtifactError", err)
	}
	if len(ae.Problems) != c.Missing || ae.Omitted != c.Omitted {
		t.Errorf("got %d listed + %d omitted problems, want %d + %d: %v", len(ae.Problems), ae.Omitted, c.Missing, c.Omitted, err)
	}
	if !strings.Contains(err.Error(), c.Error) {
		t.Errorf("got %q, want it to contain %q", err, c.Error)
	}
}
