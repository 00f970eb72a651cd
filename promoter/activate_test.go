package promoter_test

import (
	"context"
	"encoding/base64"
	"errors"
	"testing"

	"github.com/configpub/configpub/bundle"
	"github.com/configpub/configpub/internal/signing"
	"github.com/configpub/configpub/promoter"
)

func TestRecordAndActivateMovesEveryPointerAndSignsManifests(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	ctx := context.Background()
	r1 := release("prod", 1, 0, 3, nil, nil)
	res := f.promote(t, r1)
	if res.Moved != 3 || res.Unchanged != 0 || res.Outcome != promoter.OutcomeApplied || res.Replayed {
		t.Fatalf("got %+v, want 3 moved, APPLIED, not replayed", res)
	}
	f.wantPointersAt(t, r1)

	// Release 2 changes target 1 only.
	f.now = f.now.Add(minute)
	r2 := release("prod", 2, 1, 3, func(i int) bool { return i == 1 }, func(int) int64 { return 1 })
	res = f.promote(t, r2)
	if res.Moved != 1 || res.Unchanged != 2 || res.PreviousRelease != 1 {
		t.Fatalf("got %+v, want 1 moved, 2 unchanged, previous 1", res)
	}
	f.wantPointersAt(t, r2)
	if got := f.count(t, "SELECT count(*) FROM configpub.pointer_move"); got != 4 {
		t.Errorf("got %d pointer moves, want 4", got)
	}
	if got := f.count(t, "SELECT count(*) FROM configpub.delivery_manifest"); got != 4 {
		t.Errorf("got %d delivery manifests, want 4", got)
	}
	f.checkJournal(t)

	st, err := f.store.Status(ctx, "prod")
	if err != nil {
		t.Fatal(err)
	}
	if st.CurrentRelease != 2 || len(st.Releases) != 2 || st.Releases[0].State != promoter.StateSuperseded ||
		st.Releases[1].State != promoter.StateActive || st.Releases[1].Outcome != promoter.OutcomeApplied {
		t.Fatalf("got status %+v, want release 1 SUPERSEDED, release 2 ACTIVE/APPLIED", st)
	}

	// The stored manifest verifies with the key and says what the pointer says.
	pub, _ := signing.NewTrustedKey(&f.key.PublicKey)
	var body []byte
	var sig, keyID string
	var seq int64
	if err := f.pool.QueryRow(ctx, `SELECT manifest, manifest_signature, manifest_key_id, sequence
		FROM configpub.current_pointer WHERE host = 'host-00001'`).Scan(&body, &sig, &keyID, &seq); err != nil {
		t.Fatal(err)
	}
	if _, err := signing.VerifyBlob([]signing.TrustedKey{pub}, body, sig, keyID); err != nil {
		t.Fatalf("stored manifest signature: %v", err)
	}
	m, err := bundle.ParseDeliveryManifest(body)
	if err != nil {
		t.Fatal(err)
	}
	want := r2.Targets[1]
	// The sequence of a move is the move time in microseconds (above the
	// previous sequence, the first move's time).
	wantSeq := t0.Add(minute).UnixMicro()
	if m.SnapshotID != want.SnapshotID || m.Sequence != wantSeq || seq != wantSeq || m.ReleaseVersion != 2 ||
		m.ArtifactDigest != want.ArtifactDigest || m.IssuedAt != "2026-11-29T12:01:00.000Z" ||
		m.ActivatedAt != "2026-11-29T12:01:00.000Z" ||
		m.RefreshAfter != "2026-11-29T12:06:00.000Z" || m.ExpiresAt != "2026-11-29T12:16:00.000Z" {
		t.Errorf("got manifest %+v, want snapshot %s, sequence %d, activated 12:01, lease 12:01/12:06/12:16", m, want.SnapshotID, wantSeq)
	}
	if _, err := base64.StdEncoding.DecodeString(sig); err != nil {
		t.Errorf("signature is not base64: %v", err)
	}
}

func TestReplayReturnsTheRecordedResult(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	r1 := release("prod", 1, 0, 2, nil, nil)
	first := f.promote(t, r1)
	before := f.count(t, "SELECT count(*) FROM configpub.config_release_journal")
	f.now = f.now.Add(minute)
	again := f.promote(t, r1)
	if !again.Replayed {
		t.Fatal("got a fresh result, want a replay")
	}
	if again.StateNow != promoter.StateActive || again.ActiveRelease != 1 {
		t.Fatalf("replay reports release 1 %s with release %d active, want ACTIVE and 1", again.StateNow, again.ActiveRelease)
	}
	again.Replayed, again.StateNow, again.ActiveRelease = false, "", 0
	if *again != *first {
		t.Fatalf("replay got %+v, want %+v", again, first)
	}
	if after := f.count(t, "SELECT count(*) FROM configpub.config_release_journal"); after != before {
		t.Fatalf("replay wrote journal rows: %d -> %d", before, after)
	}
}

func TestSameCommandDifferentHashConflicts(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	r1 := release("prod", 1, 0, 2, nil, nil)
	f.promote(t, r1)
	other := r1
	other.Reason = "something else"
	_, err := f.store.RecordAndActivate(context.Background(), other)
	if !errors.Is(err, promoter.ErrConflict) {
		t.Fatalf("got %v, want ErrConflict", err)
	}
}

func TestBaseMismatchIsStaleConflictAndWritesNothing(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	f.promote(t, release("prod", 1, 0, 2, nil, nil))
	f.promote(t, release("prod", 2, 1, 2, nil, nil))
	old := release("prod", 3, 1, 2, nil, nil) // compiled on release 1
	old.CommandID = id("old")
	_, err := f.store.RecordAndActivate(context.Background(), old)
	if !errors.Is(err, promoter.ErrConflict) || !errors.Is(err, promoter.ErrStale) {
		t.Fatalf("got %v, want ErrConflict and ErrStale", err)
	}
	var cas *promoter.CASError
	if !errors.As(err, &cas) || cas.Expected != 1 || cas.Actual != 2 {
		t.Fatalf("got %#v, want CASError expected 1 actual 2", cas)
	}
	if n := f.count(t, "SELECT count(*) FROM configpub.command WHERE command_id = $1::text::uuid", old.CommandID); n != 0 {
		t.Fatalf("got %d command rows for the refused command, want 0", n)
	}
}

func TestInvalidInputIsRefusedWithTheField(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	tests := []struct {
		name  string
		edit  func(*promoter.ReleaseInput)
		want  error
		field string
	}{
		{"bad command id", func(in *promoter.ReleaseInput) { in.CommandID = "x" }, promoter.ErrInvalid, "commandId"},
		{"base not older", func(in *promoter.ReleaseInput) { in.BaseReleaseVersion = 1 }, promoter.ErrInvalid, "releaseVersion"},
		{"bad digest", func(in *promoter.ReleaseInput) { in.Targets[0].ContentDigest = "sha256:zz" }, promoter.ErrInvalid, "contentDigest"},
		{"values do not match digest", func(in *promoter.ReleaseInput) { in.Targets[0].Values = []byte("x") }, promoter.ErrIntegrity, "values digest"},
		{"other env", func(in *promoter.ReleaseInput) { in.Targets[0].EnvTag = "dev" }, promoter.ErrIdentityMismatch, "envTag"},
		{"bad audience", func(in *promoter.ReleaseInput) { in.Targets[0].Audience = "root" }, promoter.ErrInvalid, "audience"},
		{"no lease", func(in *promoter.ReleaseInput) { in.Targets[0].Lease = promoter.LeaseWindow{} }, promoter.ErrInvalid, "lease"},
		{"one snapshot, two identities", func(in *promoter.ReleaseInput) { in.Targets[1].SnapshotID = in.Targets[0].SnapshotID }, promoter.ErrIdentityMismatch, "claimed by"},
		{"same identity twice", func(in *promoter.ReleaseInput) { in.Targets[1].Host = in.Targets[0].Host }, promoter.ErrInvalid, "appears twice"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			in := release("prod", 1, 0, 2, nil, nil)
			tc.edit(&in)
			_, err := f.store.RecordAndActivate(context.Background(), in)
			if !errors.Is(err, tc.want) || !containsStr(err.Error(), tc.field) {
				t.Fatalf("got %v, want %v naming %q", err, tc.want, tc.field)
			}
		})
	}
	if n := f.count(t, "SELECT count(*) FROM configpub.config_release"); n != 0 {
		t.Fatalf("got %d releases after refusals, want 0", n)
	}
}
