package readback_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/configpub/configpub/bundle"
	"github.com/configpub/configpub/internal/controltoken"
	"github.com/configpub/configpub/internal/signing"
	"github.com/configpub/configpub/readback"
)

func TestLoadTargets(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		name, body, want string
	}{
		{"ok", "targets:\n  - {endpoint: 'https://a.internal:9464', host: h, serviceId: s, envTag: prod}\n", ""},
		{"unknown field", "targets:\n  - {endpoint: 'https://a.internal:9464', host: h, serviceId: s, envTag: prod, token: x}\n", "token"},
		{"other environment", "targets:\n  - {endpoint: 'https://a.internal:9464', host: h, serviceId: s, envTag: dev}\n", `not the environment "prod"`},
		{"credentials in URL", "targets:\n  - {endpoint: 'https://u:p@a.internal', host: h, serviceId: s, envTag: prod}\n", "without credentials"},
		{"twice", "targets:\n  - {endpoint: 'https://a', host: h, serviceId: s, envTag: prod}\n  - {endpoint: 'https://b', host: h, serviceId: s, envTag: prod}\n", "listed twice"},
		{"empty", "targets: []\n", "no targets"},
		{"empty file", "", "empty file: want targets: [{endpoint, host, serviceId, envTag}, ...]"}, // yaml says only EOF
		{"no identity", "targets:\n  - {endpoint: 'https://a'}\n", "required"},
		// An endpoint that does not parse is named, its password masked.
		{"not a URL", "targets:\n  - {endpoint: 'ht tp://a.internal:9464', host: h, serviceId: s, envTag: prod}\n", `endpoint "ht tp://a.internal:9464" is not a URL`},
		{"not a URL, with credentials", "targets:\n  - {endpoint: 'https://u:s3cr3t@a.internal:x', host: h, serviceId: s, envTag: prod}\n", `endpoint "https://xxxxx@a.internal:x" is not a URL: invalid port`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := filepath.Join(dir, strings.ReplaceAll(tc.name, " ", "_")+".yaml")
			if err := os.WriteFile(p, []byte(tc.body), 0o600); err != nil {
				t.Fatal(err)
			}
			ts, err := readback.LoadTargets(p, "prod")
			switch {
			case tc.want == "" && (err != nil || len(ts) != 1 || ts[0].Identity() != (bundle.Identity{Host: "h", ServiceID: "s", EnvTag: "prod"})):
				t.Fatalf("got %+v, %v; want one target h/s/prod", ts, err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("got %v, want an error naming %q", err, tc.want)
			case err != nil && strings.Contains(err.Error(), "s3cr3t"):
				t.Fatalf("got %v: the password is echoed", err)
			}
		})
	}
}

// TestReadRefusesAnswersAboutAnotherIdentity uses a fake runtime (a lying
// endpoint cannot be made from the real client, which only ever answers for
// its own identity): it verifies the control token it is sent, then answers
// with documents the collector must refuse.
func TestReadRefusesAnswersAboutAnotherIdentity(t *testing.T) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	trusted, _ := signing.NewTrustedKey(&key.PublicKey)
	want := bundle.Identity{Host: "h", ServiceID: "s", EnvTag: "prod"}
	var answer []byte
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tok := strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
		if _, err := controltoken.Verify([]signing.TrustedKey{trusted}, tok, timeNow(), 0, want.String(), controltoken.ScopeStatus); err != nil {
			http.Error(w, err.Error(), http.StatusUnauthorized)
			return
		}
		_, _ = w.Write(answer)
	}))
	defer srv.Close()
	col, err := readback.NewCollector(readback.Options{Signer: key})
	if err != nil {
		t.Fatal(err)
	}
	target := readback.Target{Endpoint: srv.URL, Host: "h", ServiceID: "s", EnvTag: "prod"}
	good := bundle.RuntimeStatus{Type: bundle.RuntimeStatusType, Host: "h", ServiceID: "s", EnvTag: "prod", Audience: "agent",
		Current: &bundle.SnapshotState{SnapshotID: "00000000-0000-8000-8000-000000000001", Result: bundle.ResultApplied}}
	for _, tc := range []struct {
		name   string
		mutate func(*bundle.RuntimeStatus)
		raw    string
		want   error
	}{
		{"good", func(*bundle.RuntimeStatus) {}, "", nil},
		{"other identity", func(s *bundle.RuntimeStatus) { s.ServiceID = "other" }, "", readback.ErrInvalidStatus},
		{"bad snapshot id", func(s *bundle.RuntimeStatus) { s.Current.SnapshotID = "x" }, "", readback.ErrInvalidStatus},
		{"current not applied", func(s *bundle.RuntimeStatus) { s.Current.Result = bundle.ResultReady }, "", readback.ErrInvalidStatus},
		{"reason with control characters", func(s *bundle.RuntimeStatus) { s.Current.Reason = "A\nB" }, "", readback.ErrInvalidStatus},
		{"unknown field", nil, `{"type":"` + bundle.RuntimeStatusType + `","host":"h","serviceId":"s","envTag":"prod","audience":"agent","x":1,"failedClosed":false,"observedAt":""}`, readback.ErrInvalidStatus},
		{"too large", nil, `{"type":"` + strings.Repeat("x", bundle.MaxRuntimeStatusBytes) + `"}`, readback.ErrInvalidStatus},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.raw != "" {
				answer = []byte(tc.raw)
			} else {
				b, _ := json.Marshal(good)
				var st bundle.RuntimeStatus
				_ = json.Unmarshal(b, &st)
				tc.mutate(&st)
				answer, _ = json.Marshal(st)
			}
			st, err := col.Read(context.Background(), target)
			if !errors.Is(err, tc.want) || (tc.want == nil && st.Current.SnapshotID != good.Current.SnapshotID) {
				t.Fatalf("got %+v, %v; want %v", st, err, tc.want)
			}
		})
	}
}

// TestARefusalIsNotUnreachable: a runtime that answers, but refuses the
// control token (its clock an hour off this host's), was reported
// "runtime status endpoint unreachable: HTTP 401 CONTROL_TOKEN_EXPIRED";
// it is a refusal, and an expired token signed just now points at the
// clocks. A runtime that does not answer is unreachable.
func TestARefusalIsNotUnreachable(t *testing.T) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	refusing := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusUnauthorized)
		w.Write([]byte(`{"reason":"CONTROL_TOKEN_EXPIRED"}`))
	}))
	defer refusing.Close()
	gone := httptest.NewServer(http.NotFoundHandler())
	gone.Close()
	col, err := readback.NewCollector(readback.Options{Signer: key, Now: timeNow})
	if err != nil {
		t.Fatal(err)
	}
	target := readback.Target{Host: "h", ServiceID: "s", EnvTag: "prod"}
	target.Endpoint = refusing.URL
	_, err = col.Read(context.Background(), target)
	if !errors.Is(err, readback.ErrRefused) || errors.Is(err, readback.ErrUnreachable) ||
		!strings.Contains(err.Error(), "CONTROL_TOKEN_EXPIRED") || !strings.Contains(err.Error(), "NTP") {
		t.Errorf("an expired-token refusal: got %v, want ErrRefused naming the reason and the clocks", err)
	}
	target.Endpoint = gone.URL
	if _, err := col.Read(context.Background(), target); !errors.Is(err, readback.ErrUnreachable) {
		t.Errorf("a runtime that does not answer: got %v, want ErrUnreachable", err)
	}
}

func timeNow() time.Time { return time.Now() }

func TestNewCollectorBoundsConcurrency(t *testing.T) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range []int{-1, readback.MaxConcurrency + 1} {
		if _, err := readback.NewCollector(readback.Options{Signer: key, Concurrency: n}); err == nil || !strings.Contains(err.Error(), "concurrency") {
			t.Fatalf("concurrency %d: got %v, want an error naming concurrency", n, err)
		}
	}
	for _, n := range []int{0, 1, readback.MaxConcurrency} {
		if _, err := readback.NewCollector(readback.Options{Signer: key, Concurrency: n}); err != nil {
			t.Fatalf("concurrency %d: %v", n, err)
		}
	}
}

// TestEachNamesTheFirstTargetsNotRead: seven runtimes whose status
// endpoints answer 503 (none is read, so nothing is recorded and no store
// is needed): the error counts all seven and names the first five in the
// targets' order.
func TestEachNamesTheFirstTargetsNotRead(t *testing.T) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	down := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "starting", http.StatusServiceUnavailable)
	}))
	defer down.Close()
	var targets []readback.Target
	var ids []string
	for i := range 7 {
		tg := readback.Target{Endpoint: down.URL, Host: "h" + strconv.Itoa(i), ServiceID: "s", EnvTag: "prod"}
		targets, ids = append(targets, tg), append(ids, tg.Identity().String())
	}
	col, err := readback.NewCollector(readback.Options{Signer: key, Concurrency: 2})
	if err != nil {
		t.Fatal(err)
	}
	res, err := readback.Run(context.Background(), col, nil, targets)
	want := "readback: 7 of 7 targets not recorded: " + strings.Join(ids[:5], ", ") + " and 2 more"
	if err == nil || err.Error() != want || len(res) != 7 {
		t.Fatalf("got %d results, %v; want 7 and %q", len(res), err, want)
	}
}
