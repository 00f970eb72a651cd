package promote

import (
	"testing"

	"github.com/google/uuid"
)

func TestCommandID(t *testing.T) {
	commit := "dc5bfbbec548742727cc4a139b9b4b0f30fff7d7"
	got := CommandID(commit, "dev")
	u, err := uuid.Parse(got)
	if err != nil {
		t.Fatalf("got %q: %v, want a UUID", got, err)
	}
	if u.Version() != 8 || u.Variant() != uuid.RFC4122 {
		t.Errorf("got version %d variant %v, want 8 and RFC 4122/9562", u.Version(), u.Variant())
	}
	if again := CommandID("DC5BFBBEC548742727CC4A139B9B4B0F30FFF7D7", "dev"); again != got {
		t.Errorf("got %s for the upper-case hash, want %s", again, got)
	}
	if other := CommandID(commit, "prod"); other == got {
		t.Errorf("got the same id %s for another environment, want a different one", other)
	}
	const want = "b1122c97-e040-86d1-991b-e1dfde2e9dab"
	if got != want {
		t.Errorf("got %s, want %s (the derivation is a stored contract)", got, want)
	}
}

// TestRecordedBeforeNamesWhatACatchUpWrote: a catch-up that fails at
// release v after recording others says which, so that the failure's
// "nothing written" (about v) is not read as "nothing at all".
func TestRecordedBeforeNamesWhatACatchUpWrote(t *testing.T) {
	for _, c := range []struct {
		caught []CaughtUp
		want   string
	}{
		{nil, ""},
		{[]CaughtUp{{ReleaseVersion: 4}}, " (release 4 was recorded by this run before it, not activated; a run again continues from release 5)"},
		{[]CaughtUp{{ReleaseVersion: 4}, {ReleaseVersion: 5}}, " (releases 4 to 5 were recorded by this run before it, not activated; a run again continues from release 6)"},
	} {
		v := int64(4 + len(c.caught))
		if got := recordedBefore(c.caught, v); got != c.want {
			t.Errorf("recordedBefore(%d caught, %d) = %q, want %q", len(c.caught), v, got, c.want)
		}
	}
}
