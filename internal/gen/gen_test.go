package gen

import (
	"context"
	"testing"
	"time"

	"github.com/configpub/configpub/compiler"
)

func TestGeneratedRepositoryCompiles(t *testing.T) {
	res, err := compiler.Compile(context.Background(), Repo(Options{Targets: 120}), compiler.Options{EnvTag: "bench", CreatedAt: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)})
	if err != nil {
		t.Fatal(err)
	}
	if got := len(res.Targets); got != 120 {
		t.Fatalf("got %d targets, want 120", got)
	}
}
