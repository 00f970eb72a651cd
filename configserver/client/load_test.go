package client_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/configpub/configpub/configserver/client"
)

// applied loads once and requires outcome want (APPLIED unless given).
func mustLoad(t *testing.T, c *client.Client, want client.Outcome) *client.Evidence {
	t.Helper()
	ev, err := c.Load(context.Background())
	if err != nil {
		t.Fatalf("Load: got error %v (evidence %+v), want %s", err, ev, want)
	}
	if ev.Outcome != want {
		t.Fatalf("Load: got outcome %s reason %s, want %s", ev.Outcome, ev.Reason, want)
	}
	return ev
}

func TestLoadAppliesThenNotModified(t *testing.T) {
	w := newWorld(t)
	r1 := w.build(w.spec(1))
	w.srv.set(r1, nil)
	c := w.client()

	ev := mustLoad(t, c, client.OutcomeApplied)
	if ev.Reason != client.ReasonNewSnapshot || ev.SnapshotID != r1.Manifest.SnapshotID || ev.ArtifactDigest != r1.ArtifactDigest() {
		t.Fatalf("evidence: got %+v, want NEW_SNAPSHOT for %s %s", ev, r1.Manifest.SnapshotID, r1.ArtifactDigest())
	}
	if ev.CurrentSnapshotID != r1.Manifest.SnapshotID || ev.FailedClosed {
		t.Fatalf("evidence: got current %q failedClosed %v, want %s false", ev.CurrentSnapshotID, ev.FailedClosed, r1.Manifest.SnapshotID)
	}
	s, err := c.Current()
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(s.Values, r1.Values) || s.Envelope != r1.Envelope || s.Namespace["agentName"] != "advisor" {
		t.Fatalf("current snapshot does not hold release 1")
	}

	ev = mustLoad(t, c, client.OutcomeUnchanged)
	if got, want := w.srv.lastRequest().Get("If-None-Match"), `"`+r1.ArtifactDigest()+`"`; got != want {
		t.Fatalf("If-None-Match: got %q, want %q", got, want)
	}
	if ev.Reason != client.ReasonNotModified || ev.SnapshotID != r1.Manifest.SnapshotID {
		t.Fatalf("evidence: got %s %s, want NOT_MODIFIED %s", ev.Reason, ev.SnapshotID, r1.Manifest.SnapshotID)
	}
}

func TestLoadRollbackWithHigherSequencePasses(t *testing.T) {
	w := newWorld(t)
	c := w.client()
	w.srv.set(w.build(w.spec(1)), nil)
	mustLoad(t, c, client.OutcomeApplied)
	w.srv.set(w.build(w.spec(2)), nil)
	mustLoad(t, c, client.OutcomeApplied)

	// Rollback: release 1's snapshot again, under a new manifest (sequence 3).
	back := w.spec(1)
	back.sequence = 3
	r := w.build(back)
	w.srv.set(r, nil)
	ev := mustLoad(t, c, client.OutcomeApplied)
	if ev.ReleaseVersion != 1 || ev.Sequence != 3 {
		t.Fatalf("rollback: got release %d sequence %d, want 1 3", ev.ReleaseVersion, ev.Sequence)
	}
}

func TestLoadLeaseRenewal(t *testing.T) {
	w := newWorld(t)
	c := w.client()
	s1 := w.spec(1)
	w.srv.set(w.build(s1), nil)
	mustLoad(t, c, client.OutcomeApplied)

	// A renewal (same sequence, later issuedAt, later lease) carried by a 304.
	renewed := s1
	renewed.issuedAt = s1.issuedAt.Add(10 * time.Minute)
	renewed.leaseTo = s1.leaseTo.Add(time.Hour)
	rr := w.build(renewed)
	w.srv.mu.Lock()
	w.srv.notModHdr = func(h http.Header) {
		for k, v := range rr.headers() {
			h[k] = v
		}
	}
	w.srv.mu.Unlock()
	ev := mustLoad(t, c, client.OutcomeApplied)
	if ev.Reason != client.ReasonLeaseRenewed || ev.LeaseExpiresAt != rr.Manifest.ExpiresAt {
		t.Fatalf("renewal via 304: got %s lease %s, want LEASE_RENEWED %s", ev.Reason, ev.LeaseExpiresAt, rr.Manifest.ExpiresAt)
	}

	// Past refreshAfter the client asks unconditionally and gets the latest manifest.
	w.clock.Advance(100 * time.Minute)
	renewed2 := renewed
	renewed2.issuedAt = renewed.issuedAt.Add(time.Hour)
	renewed2.leaseTo = renewed.leaseTo.Add(time.Hour)
	w.srv.set(w.build(renewed2), nil)
	ev = mustLoad(t, c, client.OutcomeApplied)
	if got := w.srv.lastRequest().Get("If-None-Match"); got != "" {
		t.Fatalf("past refreshAfter: got If-None-Match %q, want none", got)
	}
	if ev.Reason != client.ReasonLeaseRenewed {
		t.Fatalf("renewal via 200: got %s, want LEASE_RENEWED", ev.Reason)
	}
}

// TestTamper is the tamper suite: every case is REJECTED with its own
// reason, the last-known-good file stays byte-identical and the current
// snapshot stays the last good one.
func TestTamper(t *testing.T) {
	type served struct {
		rel    *release
		mutate func(http.Header, []byte) []byte
		raw    http.HandlerFunc
		noCond bool
	}
	other := func(w *world) keyPair { return newKeyPair(t) }
	cases := []struct {
		name   string
		serve  func(w *world, r1, r2, r3 *release) served
		reason client.Reason
		field  string
	}{
		{"one body byte flipped", func(w *world, r1, r2, r3 *release) served {
			return served{rel: r3, mutate: func(h http.Header, b []byte) []byte { b[len(b)/2] ^= 0x01; return b }}
		}, client.ReasonDigestMismatch, "body"},
		{"ETag swapped", func(w *world, r1, r2, r3 *release) served {
			return served{rel: r3, mutate: func(h http.Header, b []byte) []byte { h.Set("ETag", `"`+r1.ArtifactDigest()+`"`); return b }}
		}, client.ReasonDigestMismatch, "ETag"},
		{"X-Artifact-Digest swapped", func(w *world, r1, r2, r3 *release) served {
			return served{rel: r3, mutate: func(h http.Header, b []byte) []byte { h.Set("X-Artifact-Digest", r1.ArtifactDigest()); return b }}
		}, client.ReasonDigestMismatch, "X-Artifact-Digest"},
		{"Repr-Digest swapped", func(w *world, r1, r2, r3 *release) served {
			return served{rel: r3, mutate: func(h http.Header, b []byte) []byte { h.Set("Repr-Digest", r1.headers().Get("Repr-Digest")); return b }}
		}, client.ReasonDigestMismatch, "Repr-Digest"},
		// RFC 8941: of repeated keys the last counts — not the first, which
		// here is the body's (found reading parseReprDigest; FuzzDigestHeaders
		// holds it).
		{"Repr-Digest with the body's sha-256 then another", func(w *world, r1, r2, r3 *release) served {
			return served{rel: r3, mutate: func(h http.Header, b []byte) []byte {
				h.Set("Repr-Digest", h.Get("Repr-Digest")+", "+r1.headers().Get("Repr-Digest"))
				return b
			}}
		}, client.ReasonDigestMismatch, "Repr-Digest"},
		{"Repr-Digest that is no dictionary around the body's sha-256", func(w *world, r1, r2, r3 *release) served {
			return served{rel: r3, mutate: func(h http.Header, b []byte) []byte {
				h.Set("Repr-Digest", "Not A Member!, "+h.Get("Repr-Digest"))
				return b
			}}
		}, client.ReasonHeaderInvalid, "Repr-Digest"},
		{"manifest and signature of another identity", func(w *world, r1, r2, r3 *release) served {
			s := w.spec(3)
			s.envHost = "billing.example"
			o := w.build(s)
			return served{rel: r3, mutate: func(h http.Header, b []byte) []byte {
				h.Set("X-Config-Manifest", o.headers().Get("X-Config-Manifest"))
				h.Set("X-Manifest-Signature", o.Signature)
				return b
			}}
		}, client.ReasonIdentityMismatch, "manifest.host"},
		{"manifest and signature of an older release", func(w *world, r1, r2, r3 *release) served {
			return served{rel: r3, mutate: func(h http.Header, b []byte) []byte {
				h.Set("X-Config-Manifest", r1.headers().Get("X-Config-Manifest"))
				h.Set("X-Manifest-Signature", r1.Signature)
				return b
			}}
		}, client.ReasonSequenceRegression, "manifest.sequence"},
		{"signature by an untrusted key", func(w *world, r1, r2, r3 *release) served {
			s := w.spec(3)
			k := other(w)
			s.signer = &k
			return served{rel: w.build(s)}
		}, client.ReasonUntrustedKey, "X-Manifest-Key-Id"},
		{"untrusted signature under a trusted key id", func(w *world, r1, r2, r3 *release) served {
			s := w.spec(3)
			k := other(w)
			s.signer, s.keyID = &k, w.key.trusted.ID
			return served{rel: w.build(s)}
		}, client.ReasonSignatureInvalid, "X-Manifest-Signature"},
		{"envelope identity differs from the request", func(w *world, r1, r2, r3 *release) served {
			s := w.spec(3)
			s.envHost = "billing.example"
			s.manifestHost = w.id.Host
			return served{rel: w.build(s)}
		}, client.ReasonIdentityMismatch, "runtimePolicy.host"},
		{"unsupported schemaVersion", func(w *world, r1, r2, r3 *release) served {
			s := w.spec(3)
			s.schemaVersion = 2
			return served{rel: w.build(s)}
		}, client.ReasonSchemaUnsupported, "runtimePolicy.schemaVersion"},
		{"unknown mandatory envelope field", func(w *world, r1, r2, r3 *release) served {
			s := w.spec(3)
			s.extraEnvelope = [][2]string{{"tenantIsolation", "required"}}
			return served{rel: w.build(s)}
		}, client.ReasonUnknownField, "runtimePolicy.tenantIsolation"},
		{"another audience's namespace", func(w *world, r1, r2, r3 *release) served {
			s := w.spec(3)
			s.extraTop = [][2]string{{"gatewayPolicy", "x"}}
			return served{rel: w.build(s)}
		}, client.ReasonUnknownField, "gatewayPolicy"},
		{"duplicate key", func(w *world, r1, r2, r3 *release) served {
			s := w.spec(3)
			s.extraTop = [][2]string{{"server.httpsPort", "1"}}
			return served{rel: w.build(s)}
		}, client.ReasonDuplicateKey, "server.httpsPort"},
		{"contentDigest does not cover the namespace", func(w *world, r1, r2, r3 *release) served {
			s := w.spec(3)
			s.contentDigest = digestOf("something else")
			return served{rel: w.build(s)}
		}, client.ReasonContentDigestMismatch, "runtimePolicy.contentDigest"},
		{"propertySetDigest does not cover the settings", func(w *world, r1, r2, r3 *release) served {
			s := w.spec(3)
			s.propertySetDigest = digestOf("something else")
			return served{rel: w.build(s)}
		}, client.ReasonPropertySetMismatch, "manifest.propertySetDigest"},
		{"manifest validFrom in the future", func(w *world, r1, r2, r3 *release) served {
			s := w.spec(3)
			s.leaseFrom, s.leaseTo = t0.Add(10*time.Minute), t0.Add(3*time.Hour)
			return served{rel: w.build(s)}
		}, client.ReasonNotYetValid, "manifest.validFrom"},
		{"activated before the envelope's validFrom", func(w *world, r1, r2, r3 *release) served {
			s := w.spec(3)
			s.envFrom = t0.Add(time.Hour)
			return served{rel: w.build(s)}
		}, client.ReasonOutsideActivationWindow, "manifest.activatedAt"},
		{"activated at the envelope's expiresAt", func(w *world, r1, r2, r3 *release) served {
			s := w.spec(3)
			s.envFrom, s.envTo = t0.Add(-60*24*time.Hour), t0.Add(-time.Hour)
			return served{rel: w.build(s)}
		}, client.ReasonOutsideActivationWindow, "manifest.activatedAt"},
		{"manifest without activatedAt, envelope validFrom in the future", func(w *world, r1, r2, r3 *release) served {
			s := w.spec(3)
			s.activatedAt = time.Time{}
			s.envFrom = t0.Add(time.Hour)
			return served{rel: w.build(s)}
		}, client.ReasonNotYetValid, "runtimePolicy.validFrom"},
		{"manifest expiresAt past", func(w *world, r1, r2, r3 *release) served {
			s := w.spec(3)
			s.leaseFrom, s.leaseTo = t0.Add(-3*time.Hour), t0.Add(-time.Minute)
			return served{rel: w.build(s)}
		}, client.ReasonExpired, "manifest.expiresAt"},
		{"manifest without activatedAt, envelope expiresAt past", func(w *world, r1, r2, r3 *release) served {
			s := w.spec(3)
			s.activatedAt = time.Time{}
			s.envFrom, s.envTo = t0.Add(-60*24*time.Hour), t0.Add(-time.Minute)
			return served{rel: w.build(s)}
		}, client.ReasonExpired, "runtimePolicy.expiresAt"},
		{"lower revocation epoch", func(w *world, r1, r2, r3 *release) served {
			s := w.spec(3)
			s.epoch = 2
			return served{rel: w.build(s)}
		}, client.ReasonRevocationRegression, "manifest.revocationEpoch"},
		{"older release replayed as current", func(w *world, r1, r2, r3 *release) served {
			return served{rel: r1}
		}, client.ReasonSequenceRegression, "manifest.sequence"},
		{"older renewal of the current release replayed", func(w *world, r1, r2, r3 *release) served {
			s := r2.spec
			s.issuedAt = s.issuedAt.Add(-time.Minute)
			return served{rel: w.build(s), noCond: true}
		}, client.ReasonSequenceRegression, "manifest.issuedAt"},
		{"truncated body", func(w *world, r1, r2, r3 *release) served {
			return served{raw: func(rw http.ResponseWriter, _ *http.Request) {
				for k, v := range r3.headers() {
					rw.Header()[k] = v
				}
				rw.Header().Set("Content-Length", strconv.Itoa(len(r3.Values)))
				rw.WriteHeader(http.StatusOK)
				_, _ = rw.Write(r3.Values[:len(r3.Values)/2])
			}}
		}, client.ReasonTruncated, "body"},
		{"oversized body", func(w *world, r1, r2, r3 *release) served {
			return served{rel: r3, mutate: func(h http.Header, b []byte) []byte {
				return append(b, bytes.Repeat([]byte("#"), 64<<10)...)
			}}
		}, client.ReasonBodyTooLarge, "body"},
		{"oversized body without Content-Length", func(w *world, r1, r2, r3 *release) served {
			return served{raw: func(rw http.ResponseWriter, _ *http.Request) {
				for k, v := range r3.headers() {
					rw.Header()[k] = v
				}
				rw.WriteHeader(http.StatusOK)
				for i := 0; i < 80; i++ {
					_, _ = rw.Write(bytes.Repeat([]byte("#"), 1<<10))
					rw.(http.Flusher).Flush()
				}
			}}
		}, client.ReasonBodyTooLarge, "body"},
		{"snapshot id header differs from the signed manifest", func(w *world, r1, r2, r3 *release) served {
			return served{rel: r3, mutate: func(h http.Header, b []byte) []byte { h.Set("X-Config-Snapshot-Id", r1.Manifest.SnapshotID); return b }}
		}, client.ReasonHeaderMismatch, "X-Config-Snapshot-Id"},
		{"signature header missing", func(w *world, r1, r2, r3 *release) served {
			return served{rel: r3, mutate: func(h http.Header, b []byte) []byte { h.Del("X-Manifest-Signature"); return b }}
		}, client.ReasonHeaderMissing, "X-Manifest-Signature"},
		{"304 for another ETag", func(w *world, r1, r2, r3 *release) served {
			return served{raw: func(rw http.ResponseWriter, _ *http.Request) {
				rw.Header().Set("ETag", `"`+r3.ArtifactDigest()+`"`)
				rw.WriteHeader(http.StatusNotModified)
			}}
		}, client.ReasonUnexpectedNotModified, "ETag"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorld(t)
			c := w.client()
			r1, r2, r3 := w.build(w.spec(1)), w.build(w.spec(2)), w.build(w.spec(3))
			w.srv.set(r1, nil)
			mustLoad(t, c, client.OutcomeApplied)
			w.srv.set(r2, nil)
			mustLoad(t, c, client.OutcomeApplied)
			lkg := readFile(t, c.CachePath())

			sv := tc.serve(w, r1, r2, r3)
			w.srv.set(sv.rel, sv.mutate)
			if sv.raw != nil {
				w.srv.setRaw(sv.raw)
			}
			w.srv.mu.Lock()
			w.srv.noCond = sv.noCond
			w.srv.mu.Unlock()

			ev, err := c.Load(context.Background())
			if ev.Outcome != client.OutcomeRejected || ev.Reason != tc.reason {
				t.Fatalf("got %s %s (field %q, detail %q), want REJECTED %s", ev.Outcome, ev.Reason, ev.Field, ev.Detail, tc.reason)
			}
			if ev.Field != tc.field && !strings.HasSuffix(ev.Field, ":"+tc.field) {
				t.Errorf("field: got %q, want %q", ev.Field, tc.field)
			}
			var ve *client.VerificationError
			if !errors.As(err, &ve) || ve.Reason != tc.reason || !errors.Is(err, client.ErrRejected) {
				t.Errorf("error: got %v, want a *VerificationError %s", err, tc.reason)
			}
			if errors.Is(err, client.ErrExpired) || ev.FailedClosed {
				t.Errorf("got failed closed, want the last-known-good kept")
			}
			if ev.CurrentSnapshotID != r2.Manifest.SnapshotID {
				t.Errorf("current after rejection: got %q, want %q", ev.CurrentSnapshotID, r2.Manifest.SnapshotID)
			}
			if s, err := c.Current(); err != nil || s.SnapshotID != r2.Manifest.SnapshotID {
				t.Errorf("Current: got %v, want release 2", err)
			}
			if got := readFile(t, c.CachePath()); !bytes.Equal(got, lkg) {
				t.Errorf("last-known-good file changed after a rejection")
			}
			// A rejected candidate leaves no trace: the genuine release 3 applies.
			w.srv.set(r3, nil)
			w.srv.mu.Lock()
			w.srv.noCond = false
			w.srv.mu.Unlock()
			mustLoad(t, c, client.OutcomeApplied)
		})
	}
}

func TestLoadUnavailableStatuses(t *testing.T) {
	cases := []struct {
		name   string
		status int
		reason client.Reason
	}{
		{"unauthorized", http.StatusUnauthorized, client.ReasonUnauthorized},
		{"forbidden", http.StatusForbidden, client.ReasonForbidden},
		{"no current snapshot", http.StatusNotFound, client.ReasonNotFound},
		{"identity retired", http.StatusGone, client.ReasonRetired},
		{"store unavailable", http.StatusServiceUnavailable, client.ReasonServerError},
		{"teapot", http.StatusTeapot, client.ReasonUnexpectedStatus},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorld(t)
			c := w.client()
			w.srv.setRaw(func(rw http.ResponseWriter, _ *http.Request) { rw.WriteHeader(tc.status) })
			ev, err := c.Load(context.Background())
			if ev.Outcome != client.OutcomeUnavailable || ev.Reason != tc.reason {
				t.Fatalf("got %s %s, want UNAVAILABLE %s", ev.Outcome, ev.Reason, tc.reason)
			}
			if !errors.Is(err, client.ErrUnavailable) || !errors.Is(err, client.ErrNoSnapshot) || !ev.FailedClosed {
				t.Fatalf("got error %v failedClosed %v, want ErrUnavailable and ErrNoSnapshot", err, ev.FailedClosed)
			}
		})
	}
}

func TestNewRefusesWithoutTrustedKey(t *testing.T) {
	w := newWorld(t)
	o := w.options()
	o.TrustedKeys = nil
	if _, err := client.New(o); !errors.Is(err, client.ErrNoTrustedKey) {
		t.Fatalf("New without trusted keys: got %v, want ErrNoTrustedKey", err)
	}
	o = w.options()
	o.Audience = "portal"
	if _, err := client.New(o); err == nil {
		t.Fatalf("New with audience portal: got nil error, want one")
	}
}

func TestTokenFileIsReadPerRequest(t *testing.T) {
	w := newWorld(t)
	w.srv.set(w.build(w.spec(1)), nil)
	path := w.dir + "/token"
	writeRaw(t, path, []byte("stale-token\n"))
	c := w.client(func(o *client.Options) { o.TokenSource = client.TokenFile(path) })
	ev, err := c.Load(context.Background())
	if ev.Reason != client.ReasonUnauthorized || !errors.Is(err, client.ErrUnavailable) {
		t.Fatalf("stale token: got %s %v, want UNAUTHORIZED", ev.Reason, err)
	}
	writeRaw(t, path, []byte("test-token\n")) // rotated in place
	mustLoad(t, c, client.OutcomeApplied)
	writeRaw(t, path, nil)
	ev, _ = c.Load(context.Background())
	if ev.Reason != client.ReasonTokenUnavailable || strings.Contains(ev.Detail, "test-token") {
		t.Fatalf("empty token file: got %s %q, want TOKEN_UNAVAILABLE without the token", ev.Reason, ev.Detail)
	}
}

// TestLogsNeverCarryBodiesOrTokens loads, rejects and fails with a logger
// attached and checks that neither a body marker nor the token is logged.
func TestLogsNeverCarryBodiesOrTokens(t *testing.T) {
	w := newWorld(t)
	s := w.spec(1)
	s.namespace = copyMap(s.namespace)
	s.namespace["systemPrompt"] = "BODY-MARKER-7f3a"
	r := w.build(s)
	var logs bytes.Buffer
	c := w.client(func(o *client.Options) { o.Logger = slog.New(slog.NewJSONHandler(&logs, nil)) })
	w.srv.set(r, nil)
	mustLoad(t, c, client.OutcomeApplied)
	s2 := w.spec(2)
	s2.namespace = s.namespace
	s2.contentDigest = digestOf("x")
	w.srv.set(w.build(s2), nil)
	_, _ = c.Load(context.Background())
	w.srv.set(r, func(h http.Header, b []byte) []byte { b[5] ^= 1; return b })
	_, _ = c.Load(context.Background())
	if logs.Len() == 0 {
		t.Fatal("nothing logged")
	}
	for _, secret := range []string{"BODY-MARKER-7f3a", "test-token"} {
		if strings.Contains(logs.String(), secret) {
			t.Fatalf("logs contain %q", secret)
		}
	}
}
