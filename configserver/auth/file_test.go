package auth

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// configMapVolume lays files out as the kubelet does for a mounted ConfigMap
// or Secret: each name is a symlink into ..data, itself a symlink to a
// timestamped directory, and an update swaps ..data in one rename.
type configMapVolume struct {
	t   *testing.T
	dir string
	n   int
}

func (v *configMapVolume) update(files map[string][]byte) {
	v.t.Helper()
	v.n++
	gen := fmt.Sprintf("..2026_12_05_00_00_%02d.%d", v.n, v.n)
	if err := os.Mkdir(filepath.Join(v.dir, gen), 0o755); err != nil {
		v.t.Fatal(err)
	}
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(v.dir, gen, name), data, 0o644); err != nil {
			v.t.Fatal(err)
		}
		link := filepath.Join(v.dir, name)
		if _, err := os.Lstat(link); errors.Is(err, os.ErrNotExist) {
			if err := os.Symlink(filepath.Join("..data", name), link); err != nil {
				v.t.Fatal(err)
			}
		}
	}
	tmp := filepath.Join(v.dir, "..data_tmp")
	if err := os.Symlink(gen, tmp); err != nil {
		v.t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(v.dir, "..data")); err != nil {
		v.t.Fatal(err)
	}
}

func jwksOf(t *testing.T, keys ...*ecdsa.PrivateKey) []byte {
	t.Helper()
	var jwk []any
	for i, k := range keys {
		jwk = append(jwk, map[string]any{"kty": "EC", "crv": "P-256", "kid": fmt.Sprintf("k%d", i), "alg": "ES256",
			"x": ecX(t, k), "y": ecY(t, k)})
	}
	return mustJSON(t, map[string]any{"keys": jwk})
}

// TestFileKeysFollowARotation rotates a workload-token key the way an
// operator does, in a file mounted from a ConfigMap: add the new key, let
// tokens move to it, remove the old one. Each step takes effect on the
// next reload (the on-demand reload for an unknown key id is off here: see
// TestUnknownKeyIDReadsTheFileAgain), without a restart, and a broken
// update keeps the keys in use.
func TestFileKeysFollowARotation(t *testing.T) {
	oldKey, newKey2 := newKey(t), newKey(t)
	vol := &configMapVolume{t: t, dir: t.TempDir()}
	path := filepath.Join(vol.dir, "jwks.json")
	vol.update(map[string][]byte{"jwks.json": jwksOf(t, oldKey)})

	fk, err := NewFileKeys(path, RemoteOptions{UnknownKeyRefresh: -1})
	if err != nil {
		t.Fatal(err)
	}
	v, err := NewVerifier(fk, Options{Issuer: testIssuer, Audience: testAudience, Now: func() time.Time { return testNow }})
	if err != nil {
		t.Fatal(err)
	}
	// A key's kid is its position in the file, so each token names the
	// kid its key has in the file it is checked against.
	tokenOf := func(k *ecdsa.PrivateKey, kid string) string {
		return craftES256(t, k, map[string]any{"alg": "ES256", "kid": kid}, validClaims())
	}
	verifies := func(tok string) bool { _, err := v.Verify(tok); return err == nil }
	reload := func(wantChanged bool) {
		t.Helper()
		changed, err := fk.Reload()
		if err != nil {
			t.Fatalf("reload: %v", err)
		}
		if changed != wantChanged {
			t.Fatalf("reload: changed %v, want %v", changed, wantChanged)
		}
	}

	oldTok := tokenOf(oldKey, "k0")
	if !verifies(oldTok) {
		t.Fatal("token of the key in the file: refused")
	}
	reload(false) // the same content: the same set, cached tokens kept
	if g := fk.KeySet().Generation; g != 1 {
		t.Fatalf("generation after an unchanged reload: got %d, want 1", g)
	}

	// 1. Publish the new key next to the old one.
	vol.update(map[string][]byte{"jwks.json": jwksOf(t, oldKey, newKey2)})
	newTok := tokenOf(newKey2, "k1")
	if verifies(newTok) {
		t.Fatal("token of the new key before the reload: accepted")
	}
	reload(true)
	if !verifies(oldTok) || !verifies(newTok) {
		t.Fatal("during the rotation both keys must verify")
	}

	// A half-written or broken update keeps the keys in use.
	for name, data := range map[string][]byte{
		"truncated JSON": jwksOf(t, newKey2)[:20],
		"no keys":        []byte(`{"keys":[]}`),
		"HMAC secret":    []byte(`{"keys":[{"kty":"oct","k":"c2VjcmV0","alg":"HS256"}]}`),
	} {
		vol.update(map[string][]byte{"jwks.json": data})
		if _, err := fk.Reload(); err == nil {
			t.Fatalf("%s: reload succeeded, want an error", name)
		}
		if !verifies(oldTok) || !verifies(newTok) {
			t.Fatalf("%s: the keys in use changed", name)
		}
	}

	// 2. Remove the old key: its tokens are refused at once, cached or not.
	vol.update(map[string][]byte{"jwks.json": jwksOf(t, newKey2)})
	reload(true)
	if verifies(oldTok) {
		t.Fatal("token of the removed key: accepted")
	}
	if !verifies(tokenOf(newKey2, "k0")) {
		t.Fatal("token of the remaining key: refused")
	}

	// A file gone keeps the keys too.
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	if _, err := fk.Reload(); err == nil {
		t.Fatal("reload of a removed file: got nil, want an error")
	}
	if !verifies(tokenOf(newKey2, "k0")) {
		t.Fatal("after a failed reload: the remaining key refused")
	}
}

func TestNewFileKeysRefusesAFileWithoutKeys(t *testing.T) {
	path := filepath.Join(t.TempDir(), "jwks.json")
	if err := os.WriteFile(path, []byte(`{"keys":[]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := NewFileKeys(path, RemoteOptions{}); !errors.Is(err, ErrNoKeys) {
		t.Fatalf("got %v, want ErrNoKeys", err)
	}
	if _, err := NewFileKeys(filepath.Join(t.TempDir(), "missing.json"), RemoteOptions{}); err == nil ||
		!strings.Contains(err.Error(), "missing.json") {
		t.Fatalf("missing file: got %v, want an error naming it", err)
	}
}

// TestFileKeysRunLogs: the background reload logs a change with the key ids
// and a failure with the path, never key material.
func TestFileKeysRunLogs(t *testing.T) {
	k1, k2 := newKey(t), newKey(t)
	path := filepath.Join(t.TempDir(), "jwks.json")
	write := func(data []byte) {
		t.Helper()
		if err := os.WriteFile(path+".tmp", data, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(path+".tmp", path); err != nil {
			t.Fatal(err)
		}
	}
	write(jwksOf(t, k1))
	var mu sync.Mutex
	var logs bytes.Buffer
	logger := slog.New(slog.NewTextHandler(lockedWriter{&mu, &logs}, nil))
	fk, err := NewFileKeys(path, RemoteOptions{Interval: 5 * time.Millisecond, Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- fk.Run(ctx) }()
	defer func() { cancel(); <-done }()

	waitFor := func(what string, cond func() bool) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for !cond() {
			if time.Now().After(deadline) {
				mu.Lock()
				defer mu.Unlock()
				t.Fatalf("%s: not within 10s; log:\n%s", what, logs.String())
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	logged := func(s string) func() bool {
		return func() bool { mu.Lock(); defer mu.Unlock(); return strings.Contains(logs.String(), s) }
	}
	write(jwksOf(t, k1, k2))
	waitFor("two keys", func() bool { return len(fk.KeySet().Keys) == 2 })
	waitFor("the change logged", logged(`msg="token key file reloaded"`))
	write([]byte("{"))
	waitFor("the failure logged", logged(`msg="token key file not reloaded; the previous keys stay in use"`))
	mu.Lock()
	out := logs.String()
	mu.Unlock()
	for _, want := range []string{"keys=\"[k0 k1]\"", "path=" + path} {
		if !strings.Contains(out, want) {
			t.Errorf("log lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, ecX(t, k1)) {
		t.Errorf("log carries key material:\n%s", out)
	}
	if n := len(fk.KeySet().Keys); n != 2 {
		t.Fatalf("after a broken update: got %d keys, want the 2 in use", n)
	}
}

type lockedWriter struct {
	mu *sync.Mutex
	w  *bytes.Buffer
}

func (l lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// TestUnknownKeyIDReadsTheFileAgain: a token signed with a key just added to
// the file verifies at once, without waiting for the scheduled reload; a
// flood of tokens naming made-up key ids reads the file at most once per
// UnknownKeyRefresh.
func TestUnknownKeyIDReadsTheFileAgain(t *testing.T) {
	oldKey, newKey2 := newKey(t), newKey(t)
	vol := &configMapVolume{t: t, dir: t.TempDir()}
	path := filepath.Join(vol.dir, "jwks.json")
	vol.update(map[string][]byte{"jwks.json": jwksOf(t, oldKey)})
	now := testNow
	fk, err := NewFileKeys(path, RemoteOptions{Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	v, err := NewVerifier(fk, Options{Issuer: testIssuer, Audience: testAudience, Now: func() time.Time { return testNow }})
	if err != nil {
		t.Fatal(err)
	}
	vol.update(map[string][]byte{"jwks.json": jwksOf(t, oldKey, newKey2)})
	if _, err := v.Verify(craftES256(t, newKey2, map[string]any{"alg": "ES256", "kid": "k1"}, validClaims())); err != nil {
		t.Fatalf("token of a key added to the file: %v, want it verified by an on-demand reload", err)
	}
	reads := func() time.Time { last, _ := fk.RefreshStats(); return last }
	before := reads()
	for i := range 100 {
		tok := craftES256(t, newKey2, map[string]any{"alg": "ES256", "kid": fmt.Sprintf("made-up-%d", i)}, validClaims())
		if _, err := v.Verify(tok); !errors.Is(err, ErrInvalidToken) {
			t.Fatalf("made-up key id: %v, want refused", err)
		}
	}
	if reads() != before {
		t.Fatal("tokens naming made-up key ids read the file again within the period")
	}
	now = now.Add(DefaultUnknownKeyRefresh)
	time.Sleep(time.Millisecond) // RefreshStats keeps wall-clock times
	if _, err := v.Verify(craftES256(t, newKey2, map[string]any{"alg": "ES256", "kid": "made-up"}, validClaims())); !errors.Is(err, ErrInvalidToken) {
		t.Fatalf("made-up key id: %v, want refused", err)
	}
	if reads() == before {
		t.Fatal("a period later, a made-up key id did not read the file again")
	}
}
