package promote_test

import (
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/configpub/configpub/internal/promotertest"
	"github.com/configpub/configpub/promoter"
)

// TestTwoOperatorsRollBackAtOnceAsProcesses runs, as real configpub
// processes at once, two operators' `rollback` to the same release, the
// lease-renewal job's `lease renew` and the nightly `db gc`, round after
// round: exactly one rollback moves the pointers (exit 0) and the other is
// refused with exit 1 and a message that says another move got there, the
// renewal and the collection succeed, and every pointer is at the release
// rolled back to with its journal intact.
func TestTwoOperatorsRollBackAtOnceAsProcesses(t *testing.T) {
	c := newCLIHarness(t)
	url := c.DB.URLFor(t, "configpub_promoter")
	var want map[string]string // release 1's pointers
	for _, commit := range []string{c.Repo.R1.String(), c.Repo.R2.String()} {
		if code, out := c.run(t, url, "--commit", commit); code != 0 {
			t.Fatalf("promote %s: exit %d: %s", commit, code, out)
		}
		if want == nil {
			want = promotertest.ReadState(t, c.Pool).Pointers
		}
	}
	const rounds = 4
	for round := range rounds {
		// Back to release 2 for the next round.
		if round > 0 {
			if _, err := c.Store.Activate(context.Background(), promoter.MoveInput{CommandID: promotertest.ID("cli race", round),
				EnvTag: promotertest.Env, Release: 2, Actor: "oncall", Reason: "next round"}); err != nil {
				t.Fatal(err)
			}
		}
		rollback := func(actor string) []string {
			return []string{"rollback", "--env", promotertest.Env, "--release", "1", "--reason", "error rate after release 2",
				"--actor", actor, "--key", c.KeyPath, "--database", url}
		}
		runs := [][]string{rollback("alice"), rollback("bob"),
			{"lease", "renew", "--env", promotertest.Env, "--key", c.KeyPath, "--database", url},
			{"db", "gc", "--database", url}}
		codes, outs := make([]int, len(runs)), make([]string, len(runs))
		var wg sync.WaitGroup
		for i, args := range runs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				code, stdout, stderr := c.exec(t, args...)
				codes[i], outs[i] = code, stdout+stderr
			}()
		}
		wg.Wait()
		if codes[2] != 0 || codes[3] != 0 {
			t.Fatalf("round %d: lease renew exit %d: %s\ndb gc exit %d: %s", round, codes[2], outs[2], codes[3], outs[3])
		}
		won, lost := 0, 1
		if codes[1] == 0 {
			won, lost = 1, 0
		}
		if codes[won] != 0 || codes[lost] != 1 {
			t.Fatalf("round %d: rollback exits %d and %d, want one 0 and one 1:\n%s\n%s", round, codes[0], codes[1], outs[0], outs[1])
		}
		if !strings.Contains(outs[lost], "in flight") && !strings.Contains(outs[lost], "already the active release") {
			t.Fatalf("round %d: the refused rollback said %q, want that another move got there first", round, outs[lost])
		}
		t.Logf("round %d: %s won; the other: %s", round, runs[won][8], strings.TrimSpace(outs[lost]))
		st := promotertest.ReadState(t, c.Pool)
		if st.Current != 1 || !promotertest.PointersAt(st.Pointers, want) {
			t.Fatalf("round %d: current release %d, pointers %v; want release 1's %v", round, st.Current, st.Pointers, want)
		}
		promotertest.CheckJournal(t, st)
	}
}
