package promote_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/configpub/configpub/internal/promotertest"
	"github.com/configpub/configpub/internal/registrytest"
	"github.com/configpub/configpub/internal/signing"
	"github.com/configpub/configpub/promoter"
	"github.com/configpub/configpub/registry"
	"github.com/configpub/configpub/registry/embedded"
)

// TestRecoveryFromALostRegistry: releases 1 and 2 are promoted, then the
// registry loses its storage (the same host now answers from an empty
// one) while the store is intact. Pulling, verifying and attaching name
// the artifact that is missing; promoting the active release's commit again
// publishes every artifact of it, carried-over ones included, with the
// digests the store recorded (content-addressed), and attaching then
// gives every current pointer its manifest again.
func TestRecoveryFromALostRegistry(t *testing.T) {
	h := promotertest.New(t)
	ctx := context.Background()
	var lost atomic.Pointer[http.Handler]
	reg := registrytest.New(t, registrytest.Options{Wrap: func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if l := lost.Load(); l != nil {
				(*l).ServeHTTP(w, r)
				return
			}
			next.ServeHTTP(w, r)
		})
	}})
	h.Registry, h.Prefix = reg, reg.Host+"/configpub"
	if _, err := h.Promote(t, h.Options(h.Repo.R1)); err != nil {
		t.Fatalf("promote release 1: %v", err)
	}
	res, err := h.Promote(t, h.Options(h.Repo.R2))
	if err != nil {
		t.Fatalf("promote release 2: %v", err)
	}
	orig := map[string]registry.Result{}
	for _, r := range res.Published {
		orig[r.Repository] = r
	}
	empty, err := embedded.New(ctx, embedded.Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = empty.Close() })
	var eh http.Handler = empty
	lost.Store(&eh)

	keys := registry.VerifyOptions{Keys: []signing.TrustedKey{h.Signer.TrustedKey()}}
	for _, r := range res.Published {
		if _, err := h.Client.Pull(ctx, r.Ref()); !errors.Is(err, registry.ErrNotFound) || !strings.Contains(err.Error(), r.Ref()) {
			t.Fatalf("pull %s from the lost registry: %v, want not found naming it", r.Ref(), err)
		}
		if _, err := h.Client.Verify(ctx, r.Ref(), keys); !errors.Is(err, registry.ErrNotFound) {
			t.Fatalf("verify %s from the lost registry: %v, want not found", r.Ref(), err)
		}
	}
	ar, err := h.Store.AttachDeliveryManifests(ctx, promotertest.Env, h.Client)
	if !errors.Is(err, promoter.ErrAttachFailed) || ar.FailedCount != len(res.Published)-1 || !strings.Contains(ar.FailError, "not found") {
		t.Fatalf("attach to the lost registry: %+v, %v; want every pointer failed, not found", ar, err)
	}

	again, err := h.Promote(t, h.Options(h.Repo.R2))
	if err != nil || again.ReleaseVersion != 2 {
		t.Fatalf("promote release 2 again: %+v, %v", again, err)
	}
	if len(again.Published) != len(res.Published) {
		t.Fatalf("promote again published %d artifacts, want %d", len(again.Published), len(res.Published))
	}
	for _, r := range again.Published {
		o := orig[r.Repository]
		if !r.Pushed || r.Digest != o.Digest || r.Tag != o.Tag {
			t.Errorf("%s: published again %s %s (pushed %v), want %s %s pushed", r.Repository, r.Tag, r.Digest, r.Pushed, o.Tag, o.Digest)
		}
		if _, err := h.Client.Verify(ctx, r.Ref(), keys); err != nil {
			t.Errorf("verify %s after the recovery: %v", r.Ref(), err)
		}
	}
	ar, err = h.Store.AttachDeliveryManifests(ctx, promotertest.Env, h.Client)
	if err != nil || ar.AttachedCount != len(res.Published)-1 {
		t.Fatalf("attach after the recovery: %+v, %v", ar, err)
	}
	for _, r := range again.Published {
		if r.Kind != registry.KindValues {
			continue
		}
		if ms, err := h.Client.DeliveryManifests(ctx, r.Ref(), registry.DeliveryManifestOptions{}); err != nil || len(ms) == 0 {
			t.Errorf("%s after the recovery: %d delivery manifests, %v", r.Ref(), len(ms), err)
		}
	}
}
