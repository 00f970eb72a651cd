package gen

import (
	"context"
	"testing"

	"github.com/configpub/configpub/compiler"
)

func TestGeneratedRepositoryCompiles(t *testing.T) {
	res, err := compiler.Compile(context.Background(), Repo(Options{Targets: 120}), compiler.Options{EnvTag: "bench", CreatedAt: epoch})
	if err != nil {
		t.Fatal(err)
	}
	if got := len(res.Targets); got != 120 {
		t.Fatalf("got %d targets, want 120", got)
	}
}
