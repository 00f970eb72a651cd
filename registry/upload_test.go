package registry_test

import (
	"context"
	"io"
	"log"
	"testing"

	ggcr "github.com/google/go-containerregistry/pkg/registry"

	"github.com/configpub/configpub/internal/registrytest"
	"github.com/configpub/configpub/registry"
)

// TestBlobUploadRequests counts the blob upload requests of a first
// publish: a registry that creates a blob from a single POST
// (go-containerregistry's) gets one request per blob; one that answers 202
// and waits for the PUT (Distribution v3.1) gets POST+PUT, after the first
// few probes only the body-less POST of the two-step protocol. Either way
// every artifact verifies, and all requests share one keep-alive
// connection.
func TestBlobUploadRequests(t *testing.T) {
	const n = 6
	for _, tc := range []struct {
		name     string
		opts     registrytest.Options
		wantPUTs func(puts int) bool
		want     string
	}{
		{"single-post", registrytest.Options{Backend: ggcr.New(ggcr.Logger(log.New(io.Discard, "", 0)))}, func(p int) bool { return p == 0 }, "0"},
		{"post-then-put", registrytest.Options{}, func(p int) bool { return p == 2*n+1 }, "13 (the first repository's config, then the layer and payload of each artifact)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			reg := registrytest.New(t, tc.opts)
			c := newClient(t, registry.Options{Concurrency: 1})
			key := newKey(t)
			sum, err := c.Publish(context.Background(), registry.PublishRequest{Prefix: reg.Host + "/up", Artifacts: registrytest.Artifacts(n, "prod", 1), Signer: key})
			if err != nil {
				t.Fatal(err)
			}
			if got := reg.Count("PUT upload"); !tc.wantPUTs(got) {
				t.Errorf("got %d upload PUTs, want %s", got, tc.want)
			}
			// Every response is drained, so one publisher reuses one
			// keep-alive connection for all its requests.
			if got := reg.Conns(); got != 1 {
				t.Errorf("got %d connections for %d requests, want 1", got, reg.Total())
			}
			for _, r := range sum.Results {
				if _, err := c.Verify(context.Background(), r.Ref(), registry.VerifyOptions{Keys: trusted(t, key)}); err != nil {
					t.Fatalf("verify %s: %v", r.Ref(), err)
				}
			}
		})
	}
}
