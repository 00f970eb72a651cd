package registry_test

import (
	"context"
	"encoding/base64"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/configpub/configpub/internal/registrytest"
	"github.com/configpub/configpub/registry"
)

// basicAuth is a test fake for a registry that requires HTTP basic
// authentication (the in-process Distribution runs without auth).
func basicAuth(user, pass string) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if u, p, ok := r.BasicAuth(); !ok || u != user || p != pass {
				w.Header().Set("WWW-Authenticate", `Basic realm="test"`)
				http.Error(w, `{"errors":[{"code":"UNAUTHORIZED","message":"authentication required"}]}`, http.StatusUnauthorized)
				return
			}
			next.ServeHTTP(w, r)
		})
	}
}

func TestCredentialsFromDockerConfig(t *testing.T) {
	reg := registrytest.New(t, registrytest.Options{Wrap: basicAuth("ci", "s3cret")})
	arts := registrytest.Artifacts(1, "prod", 1)
	ctx := context.Background()

	dir := t.TempDir()
	t.Setenv("DOCKER_CONFIG", dir)
	auth := base64.StdEncoding.EncodeToString([]byte("ci:s3cret"))
	cfg := `{"auths":{"` + reg.Host + `":{"auth":"` + auth + `"}}}`
	if err := os.WriteFile(filepath.Join(dir, "config.json"), []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := registry.New(registry.Options{PlainHTTP: true}) // nil Credentials: the Docker config file
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Publish(ctx, registry.PublishRequest{Prefix: reg.Host + "/auth", Artifacts: arts, Signer: newKey(t)}); err != nil {
		t.Fatalf("publish with Docker config credentials: %v", err)
	}

	// Without credentials the same registry refuses at once (an auth
	// challenge is not a transient failure).
	anon := newClient(t, registry.Options{})
	_, err = anon.Publish(ctx, registry.PublishRequest{Prefix: reg.Host + "/auth", Artifacts: arts, Signer: newKey(t)})
	if err == nil {
		t.Fatal("publish without credentials: got success, want 401")
	}
	if !strings.Contains(err.Error(), "credential not found") {
		t.Fatalf("got %v, want an error saying no credential was found", err)
	}
}
