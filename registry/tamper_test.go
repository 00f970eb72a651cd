package registry_test

import (
	"context"
	"errors"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"oras.land/oras-go/v2"
	"oras.land/oras-go/v2/errdef"

	"github.com/configpub/configpub/bundle"
	"github.com/configpub/configpub/internal/registrytest"
	"github.com/configpub/configpub/registry"
)

func TestTamperingIsCaught(t *testing.T) {
	reg := registrytest.New(t, registrytest.Options{})
	c := newClient(t, registry.Options{})
	key, other := newKey(t), newKey(t)
	ctx := context.Background()
	prefix := reg.Host + "/cp"
	arts := registrytest.Artifacts(4, "prod", 1)
	sum, err := c.Publish(ctx, registry.PublishRequest{Prefix: prefix, Artifacts: arts[:3], Signer: key})
	if err != nil {
		t.Fatal(err)
	}
	// arts[3] is signed by another key.
	osum, err := c.Publish(ctx, registry.PublishRequest{Prefix: prefix, Artifacts: arts[3:], Signer: other})
	if err != nil {
		t.Fatal(err)
	}
	tampered, victim, donor, foreign := sum.Results[0], sum.Results[1], sum.Results[2], osum.Results[0]

	// 1. Alter the stored layer blob of `tampered` (same length).
	path := reg.BlobPath(arts[0].ArtifactDigest)
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)-2] ^= 0x20
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	// 2. Copy donor's signature manifest onto victim's signature tag.
	vd := victim.Digest
	src, dst := plainRepo(t, donor.Repository), plainRepo(t, victim.Repository)
	if _, err := oras.Copy(ctx, src, signatureTag(donor.Digest), dst, signatureTag(vd), oras.DefaultCopyOptions); err != nil {
		t.Fatalf("copy signature: %v", err)
	}

	id := func(a registry.Artifact) *bundle.Identity {
		return &bundle.Identity{Host: a.Host, ServiceID: a.ServiceID, EnvTag: a.EnvTag}
	}
	tests := []struct {
		name       string
		ref        string
		identity   *bundle.Identity
		want       error
		wantReason string
	}{
		{"altered layer blob", tampered.Ref(), nil, registry.ErrDigestMismatch, "layer"},
		{"signature by another key", foreign.Ref(), nil, registry.ErrSignature, "no trusted key"},
		{"signature copied from another artifact", victim.Ref(), nil, registry.ErrSignature, "another artifact"},
		{"annotations name another target", donor.Ref(), id(arts[1]), registry.ErrIdentity, "dev.configpub.service-id"},
		{"intact artifact, its own identity", donor.Ref(), id(arts[2]), nil, ""},
		{"missing manifest", donor.Repository + "@sha256:" + strings.Repeat("0", 64), nil, registry.ErrNotFound, "manifest"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := c.Verify(ctx, tt.ref, registry.VerifyOptions{Keys: trusted(t, key), Identity: tt.identity})
			if tt.want == nil {
				if err != nil {
					t.Fatalf("got %v, want success", err)
				}
				return
			}
			if !errors.Is(err, tt.want) {
				t.Fatalf("got %v, want %v", err, tt.want)
			}
			var ve *registry.VerificationError
			if !errors.As(err, &ve) || !strings.Contains(ve.Reason, tt.wantReason) {
				t.Fatalf("got %v, want a *VerificationError whose reason mentions %q", err, tt.wantReason)
			}
		})
	}
	t.Run("pull of altered layer", func(t *testing.T) {
		_, err := c.Pull(ctx, tampered.Ref())
		if !errors.Is(err, registry.ErrDigestMismatch) {
			t.Fatalf("got %v, want ErrDigestMismatch", err)
		}
	})
	t.Run("rotation: either trusted key verifies", func(t *testing.T) {
		if _, err := c.Verify(ctx, foreign.Ref(), registry.VerifyOptions{Keys: trusted(t, key, other)}); err != nil {
			t.Fatalf("got %v, want success with both keys trusted", err)
		}
	})
}

func signatureTag(d string) string { return strings.Replace(d, ":", "-", 1) + ".sig" }

func TestFlakyRegistryIsRetried(t *testing.T) {
	var fi *registrytest.FaultInjector
	reg := registrytest.New(t, registrytest.Options{Wrap: func(h http.Handler) http.Handler {
		fi = registrytest.NewFaultInjector(h)
		return fi
	}})
	c := newClient(t, registry.Options{Concurrency: 1, RetryMinWait: 5 * time.Millisecond, RetryMaxWait: 20 * time.Millisecond})
	key := newKey(t)
	ctx := context.Background()
	arts := registrytest.Artifacts(3, "prod", 1)
	for _, status := range []int{http.StatusServiceUnavailable, http.StatusTooManyRequests, http.StatusBadGateway} {
		fi.FailNext(3, status)
		sum, err := c.Publish(ctx, registry.PublishRequest{Prefix: reg.Host + "/flaky" + strings.ToLower(http.StatusText(status)[:3]), Artifacts: arts, Signer: key})
		if err != nil {
			t.Fatalf("status %d: got %v, want success after retries", status, err)
		}
		if sum.Pushed != 3 {
			t.Fatalf("status %d: got %d pushed, want 3", status, sum.Pushed)
		}
	}
	if got := fi.Injected(); got != 9 {
		t.Fatalf("got %d injected faults, want 9", got)
	}
}

func TestRegistryDownFailsClearly(t *testing.T) {
	var fi *registrytest.FaultInjector
	reg := registrytest.New(t, registrytest.Options{Wrap: func(h http.Handler) http.Handler {
		fi = registrytest.NewFaultInjector(h)
		return fi
	}})
	fi.SetDown(true)
	c := newClient(t, registry.Options{MaxRetries: 2, RetryMinWait: 5 * time.Millisecond, RetryMaxWait: 10 * time.Millisecond})
	ctx := context.Background()
	prefix := reg.Host + "/down"
	arts := registrytest.Artifacts(3, "prod", 1)
	sum, err := c.Publish(ctx, registry.PublishRequest{Prefix: prefix, Artifacts: arts, Signer: newKey(t)})
	if err == nil {
		t.Fatal("got success, want an error")
	}
	if !strings.Contains(err.Error(), "503") {
		t.Errorf("got %q, want the error to name the 503 status", err)
	}
	if sum == nil || len(sum.Results) != 0 || sum.Pushed != 0 {
		t.Fatalf("got summary %+v, want nothing reported as published", sum)
	}
	if fi.Injected() < 3 {
		t.Errorf("got %d attempts, want the request retried (>= 3)", fi.Injected())
	}
	fi.SetDown(false)
	if reg.Writes() != 0 {
		t.Errorf("got %d writes reaching the registry, want 0", reg.Writes())
	}
	_, err = plainRepo(t, registry.Repository(prefix, arts[0])).Resolve(ctx, "r1")
	if !errors.Is(err, errdef.ErrNotFound) {
		t.Fatalf("resolve after failed publish: got %v, want not found", err)
	}

	// Connection refused is transient too, and fails clearly once retries run out.
	cl := newClient(t, registry.Options{MaxRetries: 1, RetryMinWait: time.Millisecond, RetryMaxWait: time.Millisecond})
	_, err = cl.Publish(ctx, registry.PublishRequest{Prefix: "127.0.0.1:1/x", Artifacts: arts[:1], Signer: newKey(t)})
	if err == nil || !strings.Contains(err.Error(), "connection refused") {
		t.Fatalf("got %v, want a connection refused error", err)
	}
}
