package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/configpub/configpub/promoter"
)

// hostileSubject is a commit subject that would retitle the terminal, clear
// the screen, recolour and reverse the text after it if printed raw.
const hostileSubject = "fix\x1b]0;pwned\x07\x1b[2J\x1b[31mred\u202eesrever\r\x9b1m"

func assertNoTerminalControl(t *testing.T, out string) {
	t.Helper()
	for _, r := range out {
		if r != '\n' && (r < 0x20 || (r >= 0x7f && r < 0xa0) || r == '\u202e') {
			t.Fatalf("output holds control character %U: %q", r, out)
		}
	}
	if !strings.Contains(out, `fix\x1b]0;pwned\a\x1b[2J\x1b[31mred\u202eesrever\r\x9b1m`) {
		t.Errorf("subject not shown escaped: %q", out)
	}
}

func TestStatusEscapesCommitSubjects(t *testing.T) {
	now := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	st := &promoter.Status{EnvTag: "dev", CurrentRelease: 1,
		Releases: []promoter.ReleaseStatus{{ReleaseVersion: 1, State: "ACTIVE", Actor: "ci\x1b[8m", Reason: hostileSubject, UpdatedAt: now}},
		Targets:  []promoter.TargetStatus{{Host: "h", ServiceID: "s", LastEvidence: &promoter.Evidence{Outcome: "APPLIED\x1b[2K", ReportedAt: now}}},
	}
	var b bytes.Buffer
	if err := printStatus(context.Background(), &b, heldStatus{st}, "dev"); err != nil {
		t.Fatal(err)
	}
	assertNoTerminalControl(t, b.String())
}

func TestHistoryEscapesReasons(t *testing.T) {
	var b bytes.Buffer
	moves := []promoter.Move{{Host: "h", ServiceID: "s", Action: "ACTIVATE", Actor: "ci\x1b[8m", Reason: hostileSubject, CommandID: "c\x1b[1A", MovedAt: time.Unix(0, 0).UTC()}}
	if err := printHistory(&b, eachOf(moves)); err != nil {
		t.Fatal(err)
	}
	assertNoTerminalControl(t, b.String())
}

// TestHistoryAlignsBlocksOfRows: a history longer than historyBlock moves
// is written in blocks, each block's columns aligned on its own: a very
// long actor in the third block widens the third block's columns only.
func TestHistoryAlignsBlocksOfRows(t *testing.T) {
	const n = 2*historyBlock + historyBlock/2
	long := historyBlock*2 + 200
	var moves []promoter.Move
	for i := range n {
		actor := "ci"
		if i == long {
			actor = strings.Repeat("a", 200)
		}
		moves = append(moves, promoter.Move{Host: "h", ServiceID: "s", Action: "promote", Actor: actor, Reason: "r",
			CommandID: "cmd-" + strings.Repeat("0", 4), MovedAt: time.Unix(int64(i), 0).UTC()})
	}
	var b bytes.Buffer
	if err := printHistory(&b, eachOf(moves)); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n")
	if len(lines) != n+1 {
		t.Fatalf("%d lines, want a header and %d moves", len(lines), n)
	}
	at := func(block int) int { // where the command column starts in a block, the same on each of its lines
		t.Helper()
		first, last := 1+block*historyBlock, min((block+1)*historyBlock, n)
		col := strings.Index(lines[first], "cmd-")
		for _, l := range lines[first : last+1] {
			if strings.Index(l, "cmd-") != col {
				t.Fatalf("block %d not aligned on its own: %q vs %q", block, lines[first], l)
			}
		}
		return col
	}
	// The header aligns with the first block; the second has only short
	// cells; the third holds the long actor.
	if a, b, c := at(0), at(1), at(2); strings.Index(lines[0], "COMMAND") != a || b > a || c < b+190 {
		t.Fatalf("command column at %d, %d, %d (header %d): want the header's in the first block, no wider in the second, ≥ 190 wider in the third",
			a, b, c, strings.Index(lines[0], "COMMAND"))
	}
}
