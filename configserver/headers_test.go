package configserver

import (
	"net/http"
	"net/http/httptest"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/configpub/configpub/bundle"
	"github.com/configpub/configpub/configserver/auth"
)

// TestPreparedHeaderValues checks that a prepared delivery answers with the
// same header values as an unprepared one, that the wire form of the values
// is the header lines net/http writes for them, and that the values handed
// to a response cannot be appended to in place.
func TestPreparedHeaderValues(t *testing.T) {
	base := Delivery{
		Identity: bundle.Identity{Host: "h1.example", ServiceID: "gw", EnvTag: "prod"}, Audience: "gateway",
		SnapshotID: "0b7e4b8e-4a8e-4d3c-9a51-6f1d2a1c7e01", PublicationID: "5d0c1c53-3b6f-4f7e-8f0e-2b9d3e6a1a22",
		PolicyDigest:   "sha256:" + strings.Repeat("ab", 32),
		ContentDigest:  "sha256:" + strings.Repeat("cd", 32),
		ArtifactDigest: "sha256:" + strings.Repeat("ef", 32), ReleaseVersion: 7,
		Manifest: []byte(`{"type":"x"}`), ManifestSignature: "c2ln", ManifestKeyID: "key-1",
		ValidFrom: "2026-12-01T00:00:00Z", RefreshAfter: "2026-12-01T00:05:00Z", ExpiresAt: "2026-12-01T00:15:00Z",
		Body: []byte("a: 1\n"),
	}
	cases := map[string]func(d *Delivery){
		"sha256":          func(*Delivery) {},
		"no manifest":     func(d *Delivery) { d.Manifest, d.ManifestSignature, d.ManifestKeyID = nil, "", "" },
		"other digest":    func(d *Delivery) { d.ArtifactDigest = "sha512:abc" },
		"values to clean": func(d *Delivery) { d.PublicationID, d.ManifestKeyID = " p\r\n1 ", "k\n2" },
		"empty values":    func(d *Delivery) { d.PolicyDigest, d.ValidFrom = "", "" },
	}
	for name, edit := range cases {
		t.Run(name, func(t *testing.T) {
			plain := base
			edit(&plain)
			prepared := plain
			prepared.Prepare()
			if prepared.ArtifactDigest != plain.ArtifactDigest {
				t.Fatalf("Prepare changed the artifact digest to %q", prepared.ArtifactDigest)
			}
			want := answerHeaders(t, &plain)
			got := answerHeaders(t, &prepared)
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("prepared headers differ:\n got  %q\n want %q", got, want)
			}
			// The wire lines are the header lines net/http writes.
			var lines []string
			for _, l := range strings.Split(string(prepared.hv.appendWire(nil)), "\r\n") {
				if l != "" {
					lines = append(lines, l)
				}
			}
			n := 0
			for k, vs := range want {
				if k == "Content-Type" || k == "Content-Length" || k == bundle.HeaderManifest {
					continue // written per answer, not prepared
				}
				for _, v := range vs {
					n++
					if !slices.Contains(lines, k+": "+v) {
						t.Errorf("wire lacks %q: %q", k+": "+v, lines)
					}
				}
			}
			if len(lines) != n {
				t.Errorf("wire has %d lines, want %d (one per header value): %q", len(lines), n, lines)
			}
			for i := range prepared.hv.vals {
				if v := prepared.hv.value(i); v != nil && cap(v) != 1 {
					t.Errorf("value %s has capacity %d: an append would write into the shared values", headerKeys[i], cap(v))
				}
			}
		})
	}
}

// answerHeaders returns the headers writeDelivery sets for d.
func answerHeaders(t *testing.T, d *Delivery) http.Header {
	t.Helper()
	h := &handler{}
	rec := httptest.NewRecorder()
	r := httptest.NewRequest(http.MethodGet, "/configs", nil)
	rl := &reqLog{}
	c := &auth.Claims{Host: d.Identity.Host, ServiceID: d.Identity.ServiceID, EnvTag: d.Identity.EnvTag, ConfigAudience: d.Audience}
	if herr := h.writeDelivery(rec, r, rl, c, d); herr != nil {
		t.Fatalf("writeDelivery: %v", herr)
	}
	res := rec.Result()
	defer res.Body.Close()
	return res.Header
}
