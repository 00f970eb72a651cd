package review_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/configpub/configpub/internal/gittest"
	"github.com/configpub/configpub/promote/review"
)

// TestRequireSignedByWebFlow: the review gate GitHub can satisfy. GitHub's
// merge and squash buttons write commits committed by "GitHub
// <noreply@github.com>" and signed (RSA, armored detached signature in the
// gpgsig header) with its web-flow key; --require-signed-by with that
// keyring accepts them and refuses a merge made and pushed without it. A
// test key in the same format stands in for GitHub's.
func TestRequireSignedByWebFlow(t *testing.T) {
	webFlow := gittest.NewWebFlowKey(t)
	other := gittest.NewKey(t, "Mallory", "mallory@example.com")
	r := gittest.New(t)
	r.Commit(gittest.Commit{Files: map[string][]byte{"a.yaml": []byte("a: 1\n")}, Message: "initial"})
	feature := func(name, content string) {
		r.Branch(name, r.Tip(gittest.Main))
		r.Commit(gittest.Commit{Branch: name, Files: map[string][]byte{"a.yaml": []byte(content)}, Message: "edit on " + name})
	}
	feature("pr-1", "a: 2\n")
	merged := r.Merge(gittest.Main, "pr-1", gittest.Commit{Message: "Merge pull request #1 from org/pr-1",
		Committer: &gittest.WebFlowCommitter, SignWith: webFlow})
	squashed := r.Commit(gittest.Commit{Files: map[string][]byte{"a.yaml": []byte("a: 3\n")}, Message: "Raise a (#2)",
		Committer: &gittest.WebFlowCommitter, SignWith: webFlow})
	feature("pr-3", "a: 4\n")
	unsigned := r.Merge(gittest.Main, "pr-3", gittest.Commit{Message: "Merge branch 'pr-3'"})
	feature("pr-4", "a: 5\n")
	forged := r.Merge(gittest.Main, "pr-4", gittest.Commit{Message: "Merge pull request #4 from org/pr-4",
		Committer: &gittest.WebFlowCommitter, SignWith: other})

	c, _ := r.Git.CommitObject(merged)
	if !strings.HasPrefix(c.PGPSignature, "-----BEGIN PGP SIGNATURE-----") || len(c.ParentHashes) != 2 || c.Committer.Email != "noreply@github.com" {
		t.Fatalf("test merge is not in web-flow form: parents %d, committer %s, signature %.40q", len(c.ParentHashes), c.Committer.Email, c.PGPSignature)
	}
	for _, tc := range []struct {
		name   string
		commit string
		want   error
	}{
		{"merge commit signed by web-flow", merged.String(), nil},
		{"squash commit signed by web-flow", squashed.String(), nil},
		{"unsigned merge", unsigned.String(), review.ErrUnsigned},
		{"merge signed by another key as GitHub", forged.String(), review.ErrUnsigned},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := review.Check(context.Background(), r.Git, review.Options{Commit: tc.commit, RequireSignedBy: webFlow.Armored})
			if tc.want == nil {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				if got.SignedBy != strings.ToUpper(fingerprint(webFlow)) {
					t.Errorf("signed by %s, want the web-flow key %s", got.SignedBy, fingerprint(webFlow))
				}
				return
			}
			var re *review.RefusalError
			if !errors.Is(err, tc.want) || !errors.As(err, &re) {
				t.Fatalf("got %v, want a refusal wrapping %v", err, tc.want)
			}
		})
	}
}
