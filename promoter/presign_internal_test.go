package promoter

import (
	"testing"
	"time"
)

func TestPresignedIsReusedOnlyForTheSamePointerAndContentWhileFresh(t *testing.T) {
	t0 := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	prev := "11111111-1111-8111-8111-111111111111"
	base := pointerTarget{Host: "h", ServiceID: "s", Audience: "agent", SnapshotID: "22222222-2222-8222-8222-222222222222",
		ArtifactDigest: "sha256:a", RefreshMS: 1000, ExpiresMS: 2000, PrevSnapshot: &prev, PrevSequence: 4}
	signed := base
	signed.Sequence, signed.IssuedAt, signed.Manifest, signed.Signature = 5, t0, []byte("m"), "sig"
	pre := &presigned{byID: map[[2]string]pointerTarget{{"h", "s"}: signed}, issuedAt: t0}
	other := "33333333-3333-8333-8333-333333333333"
	tests := []struct {
		name string
		edit func(p *pointerTarget)
		now  time.Time
		want bool
	}{
		{"same pointer and content", func(*pointerTarget) {}, t0.Add(time.Second), true},
		{"pointer moved meanwhile", func(p *pointerTarget) { p.PrevSequence = 5 }, t0.Add(time.Second), false},
		{"other previous snapshot", func(p *pointerTarget) { p.PrevSnapshot = &other }, t0.Add(time.Second), false},
		{"no previous pointer now", func(p *pointerTarget) { p.PrevSnapshot = nil }, t0.Add(time.Second), false},
		{"other content", func(p *pointerTarget) { p.ArtifactDigest = "sha256:b" }, t0.Add(time.Second), false},
		{"other lease window", func(p *pointerTarget) { p.ExpiresMS = 3000 }, t0.Add(time.Second), false},
		{"too old", func(*pointerTarget) {}, t0.Add(maxPresignAge + time.Millisecond), false},
		{"clock went back", func(*pointerTarget) {}, t0.Add(-time.Millisecond), false},
		{"other identity", func(p *pointerTarget) { p.Host = "x" }, t0.Add(time.Second), false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := base
			tc.edit(&p)
			got := pre.take(&p, tc.now)
			if got != tc.want {
				t.Fatalf("got reuse %v, want %v", got, tc.want)
			}
			if got && (p.Signature != "sig" || p.Sequence != 5 || !p.IssuedAt.Equal(t0)) {
				t.Fatalf("got %+v, want the presigned manifest copied", p)
			}
			if !got && p.Signature != "" {
				t.Fatalf("got signature %q copied on refusal", p.Signature)
			}
		})
	}
	var none *presigned
	p := base
	if none.take(&p, t0) {
		t.Fatal("a nil presigned set reused something")
	}
}
