package bundle

import (
	"bytes"
	"testing"
)

// FuzzParseDeliveryManifest: the runtime's reader of the signed delivery
// manifest accepts only canonical bytes: whatever it accepts is exactly
// what Marshal writes for it (so a signature over the bytes is a signature
// over the fields a runtime acts on), reads back to the same fields, and
// names a known type and phase.
func FuzzParseDeliveryManifest(f *testing.F) {
	for _, phase := range []string{"", PhaseCandidate} {
		m := sampleManifest()
		m.Phase = phase
		m.ActivatedAt = "2026-11-29T12:59:00Z"
		b, err := m.Marshal()
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
		f.Add(bytes.Replace(b, []byte(`"host"`), []byte(`"Host"`), 1))
		f.Add(bytes.Replace(b, []byte(`"sequence":3`), []byte(`"sequence":3.0`), 1))
		f.Add(bytes.Replace(b, []byte(`"sequence":3`), []byte(`"sequence":9007199254740993`), 1))
		f.Add(append(bytes.Clone(b), ' '))
		f.Add(bytes.Replace(b, []byte(`{`), []byte(`{"host":"other",`), 1))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := ParseDeliveryManifest(b)
		if err != nil {
			return
		}
		if m.Type != DeliveryManifestType || (m.Phase != "" && m.Phase != PhaseCandidate) {
			t.Fatalf("accepted type %q phase %q", m.Type, m.Phase)
		}
		out, err := m.Marshal()
		if err != nil {
			t.Fatalf("marshal an accepted manifest: %v", err)
		}
		if !bytes.Equal(out, b) {
			t.Fatalf("accepted bytes that are not its canonical form:\n%s\n%s", b, out)
		}
		back, err := ParseDeliveryManifest(out)
		if err != nil || *back != *m {
			t.Fatalf("canonical form reads back as %+v (%v), want %+v", back, err, m)
		}
	})
}
