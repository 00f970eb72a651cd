package registry_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/configpub/configpub/internal/registrytest"
	"github.com/configpub/configpub/registry"
)

// TestARegistryThatNeverAnswersTimesOut: a registry that accepts the
// connection and never answers (a fault-injecting handler holds every
// request) fails a pull after ResponseHeaderTimeout, not when the caller's
// context ends: the client had no timeout but the context's, and a renewer
// without a deadline waited for ever.
func TestARegistryThatNeverAnswersTimesOut(t *testing.T) {
	ctx := context.Background()
	var hang *registrytest.FaultInjector
	reg := registrytest.New(t, registrytest.Options{Wrap: func(h http.Handler) http.Handler { hang = registrytest.NewFaultInjector(h); return hang }})
	t.Cleanup(hang.Release)
	rc, err := registry.New(registry.Options{PlainHTTP: true, MaxRetries: -1, ResponseHeaderTimeout: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	sum, err := rc.Publish(ctx, registry.PublishRequest{Prefix: reg.Host + "/configpub", Artifacts: registrytest.Artifacts(1, "prod", 1), Signer: newKey(t)})
	if err != nil {
		t.Fatal(err)
	}
	hang.SetHanging(true)
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	start := time.Now()
	_, err = rc.Pull(cctx, sum.Results[0].Ref())
	if err == nil || cctx.Err() != nil || time.Since(start) > 10*time.Second {
		t.Fatalf("pull from a registry that never answers: %v after %s; want a response-header timeout within seconds", err, time.Since(start))
	}
}
