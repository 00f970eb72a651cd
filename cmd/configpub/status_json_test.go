package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"testing"
	"time"

	"github.com/configpub/configpub/promoter"
)

// TestStatusJSONStreamedEqualsEncoded: the status written target by target
// is byte for byte what encoding the whole status writes, with no, one and
// several targets, optional fields set and unset, and strings the encoder
// escapes.
func TestStatusJSONStreamedEqualsEncoded(t *testing.T) {
	at := time.Date(2026, 12, 3, 18, 0, 0, 0, time.UTC)
	target := func(i int) promoter.TargetStatus {
		ts := promoter.TargetStatus{Host: fmt.Sprintf("h%d.example", i), ServiceID: "svc<&>\u2028", EnvTag: "prod",
			Audience: "agent", ReleaseVersion: int64(i), State: "APPLIED", MovedAt: at, LeaseExpiresAt: at.Add(time.Hour)}
		if i%2 == 1 {
			ts.AcknowledgedAt = &at
			ts.Running = &promoter.RunningSnapshot{SnapshotID: "s", ReleaseVersion: 1}
		}
		return ts
	}
	for _, n := range []int{0, 1, 3} {
		st := &promoter.Status{EnvTag: "prod", CurrentRelease: 2, Releases: []promoter.ReleaseStatus{{ReleaseVersion: 2, State: "ACTIVE"}},
			Targets: []promoter.TargetStatus{}, WorkflowViews: []promoter.WorkflowViewStatus{{Workflow: "w\u2028"}}}
		for i := 0; i < n; i++ {
			st.Targets = append(st.Targets, target(i))
		}
		sameAsEncoded(t, fmt.Sprintf("%d targets", n), st, func(w io.Writer) error {
			return writeStatusJSON(context.Background(), w, heldStatus{st}, "prod")
		})
	}
}

// heldStatus serves a Status held in memory to writeStatusJSON and
// printStatus, as the release store serves one it reads.
type heldStatus struct{ st *promoter.Status }

// Now is a fixed time: 2026-12-03T18:00:00Z.
func (heldStatus) Now() time.Time { return time.Date(2026, 12, 3, 18, 0, 0, 0, time.UTC) }

func (h heldStatus) StatusHead(context.Context, string) (*promoter.Status, error) {
	head := *h.st
	head.Targets = []promoter.TargetStatus{}
	return &head, nil
}

func (h heldStatus) EachTargetStatus(_ context.Context, _ string, fn func(*promoter.TargetStatus) error) error {
	for i := range h.st.Targets {
		t := h.st.Targets[i]
		if err := fn(&t); err != nil {
			return err
		}
	}
	return nil
}

// TestJSONArrayStreamedEqualsEncoded: history's arrays written element by
// element, from a slice or as each is read, are byte for byte what encoding
// the whole slice writes.
func TestJSONArrayStreamedEqualsEncoded(t *testing.T) {
	at := time.Date(2026, 12, 3, 18, 0, 0, 0, time.UTC)
	for _, n := range []int{-1, 0, 1, 4} {
		var moves []promoter.Move
		if n == 0 {
			moves = []promoter.Move{}
		}
		for i := 0; i < n; i++ {
			moves = append(moves, promoter.Move{Host: fmt.Sprintf("h%d", i), ServiceID: "svc<&>", EnvTag: "prod",
				Action: "activate", Actor: "A <a@example.com>", Reason: "r\u2028\n", MovedAt: at})
		}
		sameAsEncoded(t, fmt.Sprintf("%d moves", n), moves, func(w io.Writer) error { return writeJSONArray(w, moves) })
		if moves != nil {
			sameAsEncoded(t, fmt.Sprintf("%d moves, each as it comes", n), moves, func(w io.Writer) error {
				return writeJSONEach(w, eachOf(moves))
			})
		}
	}
}

// eachOf passes each of xs in turn, as the release store passes what it
// reads.
func eachOf[T any](xs []T) func(func(*T) error) error {
	return func(fn func(*T) error) error {
		for i := range xs {
			x := xs[i]
			if err := fn(&x); err != nil {
				return err
			}
		}
		return nil
	}
}

// sameAsEncoded fails unless stream writes what writeJSON writes for v.
func sameAsEncoded(t *testing.T, what string, v any, stream func(io.Writer) error) {
	t.Helper()
	var want, got bytes.Buffer
	if err := writeJSON(&want, v); err != nil {
		t.Fatal(err)
	}
	if err := stream(&got); err != nil {
		t.Fatal(err)
	}
	if got.String() != want.String() {
		t.Errorf("%s: streamed\n%s\nencoded\n%s", what, got.String(), want.String())
	}
}
