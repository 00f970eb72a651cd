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
