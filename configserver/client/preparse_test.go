package client_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"net/http"
	"runtime"
	"strconv"
	"testing"

	"github.com/configpub/configpub/configserver/client"
)

// hostileBody is a 3.8 MB YAML document that costs hundreds of megabytes to
// parse (one node per two bytes).
func hostileBody() []byte {
	var b bytes.Buffer
	b.WriteString("runtimePolicy: {}\nagentPolicy:\n  rules: [")
	for b.Len() < 3_800_000 {
		b.WriteString("0,")
	}
	b.WriteString("0]\n")
	return b.Bytes()
}

// largeBodyCase serves release 1's headers with the hostile body and every
// announced digest (ETag, X-Artifact-Digest, Repr-Digest) rewritten to match
// it, as a hostile peer would; forge replaces the manifest signature too (an
// unauthenticated response), else the signed manifest is authentic but
// vouches for other bytes.
func largeBodyCase(w *world, forge bool) {
	r1 := w.build(w.spec(1))
	other := newKeyPair(w.t)
	forged := w.build(func() spec { s := w.spec(1); s.signer = &other; s.keyID = w.key.trusted.ID; return s }())
	body := hostileBody()
	sum := sha256.Sum256(body)
	d := "sha256:" + hex.EncodeToString(sum[:])
	w.srv.set(r1, func(h http.Header, _ []byte) []byte {
		h.Set("ETag", `"`+d+`"`)
		h.Set("X-Artifact-Digest", d)
		h.Set("Repr-Digest", "sha-256=:"+base64.StdEncoding.EncodeToString(sum[:])+":")
		if forge {
			h.Set("X-Manifest-Signature", forged.Signature)
		}
		return body
	})
}

// allocatedDuring returns the bytes allocated while f runs.
func allocatedDuring(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// TestLargeBodyIsNeverParsedUnauthenticated: a 3.8 MB hostile body is
// refused before it is parsed: unread when the manifest signature does not
// verify, read but unparsed when its digest is not the signed one, and
// refused by Content-Length with the default bound.
func TestLargeBodyIsNeverParsedUnauthenticated(t *testing.T) {
	cases := []struct {
		name     string
		forge    bool
		maxBody  int64
		reason   client.Reason
		maxAlloc uint64
	}{
		{"forged signature, 8 MiB bound", true, 8 << 20, client.ReasonSignatureInvalid, 1 << 20},
		{"authentic manifest for other bytes, 8 MiB bound", false, 8 << 20, client.ReasonManifestMismatch, 10 << 20},
		{"authentic manifest, default bound", false, 0, client.ReasonBodyTooLarge, 1 << 20},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorld(t)
			largeBodyCase(w, tc.forge)
			c := w.client(func(o *client.Options) { o.MaxBodyBytes = tc.maxBody })
			var ev *client.Evidence
			alloc := allocatedDuring(func() { ev, _ = c.Load(context.Background()) })
			if ev.Outcome != client.OutcomeRejected || ev.Reason != tc.reason {
				t.Fatalf("got %s %s (%s), want REJECTED %s", ev.Outcome, ev.Reason, ev.Detail, tc.reason)
			}
			t.Logf("allocated %d bytes for a %d-byte body", alloc, len(hostileBody()))
			if alloc > tc.maxAlloc {
				t.Fatalf("allocated %d bytes, want at most %d: the body was parsed", alloc, tc.maxAlloc)
			}
		})
	}
}

// BenchmarkUnauthenticatedLargeBody measures what refusing a 3.8 MB hostile
// body with a forged manifest signature costs (B/op is the figure; run with
// -benchtime 3x). Options allow bodies up to 8 MiB so that the bound alone
// does not refuse it.
func BenchmarkUnauthenticatedLargeBody(b *testing.B) {
	for _, forge := range []bool{true, false} {
		b.Run("forged="+strconv.FormatBool(forge), func(b *testing.B) {
			w := newWorld(b)
			largeBodyCase(w, forge)
			c := w.client(func(o *client.Options) { o.MaxBodyBytes = 8 << 20 })
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if ev, _ := c.Load(context.Background()); ev.Outcome != client.OutcomeRejected {
					b.Fatalf("got %s", ev.Outcome)
				}
			}
		})
	}
}
