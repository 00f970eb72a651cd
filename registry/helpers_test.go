package registry_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"slices"
	"testing"

	"oras.land/oras-go/v2/registry/remote"
)

func listTags(t testing.TB, _ any, repo string) []string {
	t.Helper()
	r, err := remote.NewRepository(repo)
	if err != nil {
		t.Fatal(err)
	}
	r.PlainHTTP = true
	var tags []string
	if err := r.Tags(context.Background(), "", func(ts []string) error { tags = append(tags, ts...); return nil }); err != nil {
		t.Fatalf("list tags of %s: %v", repo, err)
	}
	return tags
}

func contains(s []string, v string) bool { return slices.Contains(s, v) }

func sha256hex(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

func plainRepo(t testing.TB, name string) *remote.Repository {
	t.Helper()
	r, err := remote.NewRepository(name)
	if err != nil {
		t.Fatal(err)
	}
	r.PlainHTTP = true
	return r
}
