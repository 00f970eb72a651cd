package auth

import (
	"bytes"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestJWKSCredentialsAreNeverLogged: a JWKS URL may carry a password or a
// query credential (an API key, a signed URL). A failed refresh named the
// whole URL in its error and in the log line, and a client provokes that
// refresh with any unknown key id: now a password is masked and the query
// left out, whether the fetch could not connect, was answered with an
// error status, or returned no JWKS.
func TestJWKSCredentialsAreNeverLogged(t *testing.T) {
	bad := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/500") {
			http.Error(w, "down", http.StatusInternalServerError)
			return
		}
		w.Write([]byte("not json"))
	}))
	defer bad.Close()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := l.Addr().String()
	l.Close()
	const secrets = "user:JwksPassSecret42@"
	for name, u := range map[string]string{
		"unreachable":  "http://" + secrets + closed + "/jwks.json?api_key=JwksQuerySecret42",
		"error status": "http://" + secrets + strings.TrimPrefix(bad.URL, "http://") + "/500?sig=JwksQuerySecret42",
		"not a JWKS":   "http://" + secrets + strings.TrimPrefix(bad.URL, "http://") + "/jwks.json?api_key=JwksQuerySecret42",
	} {
		t.Run(name, func(t *testing.T) {
			var log bytes.Buffer
			rk := NewRemoteKeys(u, RemoteOptions{Logger: slog.New(slog.NewJSONHandler(&log, nil))})
			err := rk.Refresh(t.Context())
			if err == nil {
				t.Fatal("refresh succeeded")
			}
			rk.RefreshForUnknownKey(t.Context(), "made-up-kid")
			for what, s := range map[string]string{"error": err.Error(), "log": log.String()} {
				if strings.Contains(s, "JwksPassSecret42") || strings.Contains(s, "JwksQuerySecret42") {
					t.Errorf("%s shows a credential: %s", what, s)
				}
				if !strings.Contains(s, "user:xxxxx@") || !strings.Contains(s, "/jwks.json?…") && !strings.Contains(s, "/500?…") {
					t.Errorf("%s does not name the URL (masked): %s", what, s)
				}
			}
		})
	}
}
