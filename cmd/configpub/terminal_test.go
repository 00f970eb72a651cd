package main

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/configpub/configpub/promoter"
	"github.com/configpub/configpub/readback"
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

// TestHistoryAlignsBlocksOfRows: a history longer than tableBlock moves
// is written in blocks, each block's columns aligned on its own: a very
// long actor in the third block widens the third block's columns only.
func TestHistoryAlignsBlocksOfRows(t *testing.T) {
	const n = 2*tableBlock + tableBlock/2
	var moves []promoter.Move
	for i := range n {
		actor := "ci"
		if i == 2*tableBlock+200 {
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
	assertAlignedInBlocks(t, lines[0], lines[1:], "COMMAND", "cmd-")
}

// TestStatusAlignsBlocksOfTargets: the targets' table of an environment of
// more than tableBlock targets is written in blocks like the history's: a
// very long host name in the third block widens the third block only.
func TestStatusAlignsBlocksOfTargets(t *testing.T) {
	const n = 2*tableBlock + tableBlock/2
	st := &promoter.Status{EnvTag: "dev", CurrentRelease: 1,
		Releases: []promoter.ReleaseStatus{{ReleaseVersion: 1, State: "ACTIVE", Actor: "ci", UpdatedAt: time.Unix(0, 0).UTC()}}}
	for i := range n {
		host := fmt.Sprintf("h%04d", i)
		if i == 2*tableBlock+200 {
			host = strings.Repeat("h", 200)
		}
		st.Targets = append(st.Targets, promoter.TargetStatus{Host: host, ServiceID: "s", Audience: "agent", SnapshotID: "snap"})
	}
	var b bytes.Buffer
	if err := printStatus(context.Background(), &b, heldStatus{st}, "dev"); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n")
	at := slices.IndexFunc(lines, func(l string) bool { return strings.HasPrefix(l, "TARGET ") })
	if at < 0 || len(lines) < at+1+n {
		t.Fatalf("no targets' table of %d rows in %d lines", n, len(lines))
	}
	assertAlignedInBlocks(t, lines[at], lines[at+1:at+1+n], "AUDIENCE", "agent")
}

// assertAlignedInBlocks checks that rows, under header, are aligned per
// block of tableBlock rows: cell (the column's value in every row) starts
// at one offset within each block; the header's column (named col) aligns
// with the first block; the second block, with only short cells, is no
// wider; the third, holding one long cell before it, is ≥ 190 wider.
func assertAlignedInBlocks(t *testing.T, header string, rows []string, col, cell string) {
	t.Helper()
	at := func(block int) int {
		t.Helper()
		first, last := block*tableBlock, min((block+1)*tableBlock, len(rows))
		c := strings.Index(rows[first], cell)
		for _, l := range rows[first:last] {
			if strings.Index(l, cell) != c {
				t.Fatalf("block %d not aligned on its own: %q vs %q", block, rows[first], l)
			}
		}
		return c
	}
	if a, b, c := at(0), at(1), at(2); strings.Index(header, col) != a || b > a || c < b+190 {
		t.Fatalf("column %s at %d, %d, %d (header %d): want the header's in the first block, no wider in the second, ≥ 190 wider in the third",
			col, a, b, c, strings.Index(header, col))
	}
}

// TestReadbackAlignsBlocksOfResults: readback's table of more than
// tableBlock results is written in blocks like the history's: a very long
// host name in the third block widens the third block only.
func TestReadbackAlignsBlocksOfResults(t *testing.T) {
	const n = 2*tableBlock + tableBlock/2
	var results []readback.Result
	for i := range n {
		host := fmt.Sprintf("h%04d", i)
		if i == 2*tableBlock+200 {
			host = strings.Repeat("h", 200)
		}
		results = append(results, readback.Result{Target: readback.Target{Host: host, ServiceID: "s", EnvTag: "dev"}, Error: "unreachable"})
	}
	var b bytes.Buffer
	if err := printReadback(&b, eachOf(results)); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n")
	if len(lines) != n+1 {
		t.Fatalf("%d lines, want a header and %d results", len(lines), n)
	}
	assertAlignedInBlocks(t, lines[0], lines[1:], "ERROR", "unreachable")
}

// TestActivatableSaysWhenAReleaseCanBeMovedTo: the status column, before,
// inside and after the window, and without one.
func TestActivatableSaysWhenAReleaseCanBeMovedTo(t *testing.T) {
	from := time.Date(2026, 12, 4, 0, 0, 0, 0, time.UTC)
	until := from.Add(21 * 24 * time.Hour)
	r := promoter.ReleaseStatus{ActivatableFrom: &from, ActivatableUntil: &until}
	for _, c := range []struct {
		now  time.Time
		r    promoter.ReleaseStatus
		want string
	}{
		{from.Add(-time.Second), r, "from 2026-12-04T00:00:00Z"},
		{from, r, "until 2026-12-25T00:00:00Z"},
		{until.Add(-time.Second), r, "until 2026-12-25T00:00:00Z"},
		{until, r, "ended 2026-12-25T00:00:00Z"},
		{until.Add(90 * 24 * time.Hour), r, "ended 2026-12-25T00:00:00Z"},
		{from, promoter.ReleaseStatus{}, "-"},
	} {
		if got := activatable(c.r, c.now); got != c.want {
			t.Errorf("activatable at %s: got %q, want %q", c.now.Format(time.RFC3339), got, c.want)
		}
	}
}
