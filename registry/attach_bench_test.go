package registry_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"oras.land/oras-go/v2/registry/remote"

	"github.com/configpub/configpub/internal/registrytest"
	"github.com/configpub/configpub/registry"
)

// BenchmarkAttachRenewals attaches one renewed delivery manifest to each of
// 20 artifacts in an in-memory Distribution registry, 60 renewals in a row
// (five hours of five-minute renewals), as `lease renew --attach` does, and
// reports the last renewal's attach time and registry requests per
// artifact and the referrers a runtime then lists, for two series in one run: attaching and pruning
// (what configpub does, keeping registry.KeepDeliveryManifests), and
// attaching only (what it did before: the baseline that does less work per
// attach). Distribution keeps referrers in a tagged index (no referrers
// API), so without pruning each attach rewrites an index that grows by one
// every renewal.
func BenchmarkAttachRenewals(b *testing.B) {
	artifacts, renewals := 20, 60
	if testing.Short() { // make bench-smoke: that it runs
		artifacts, renewals = 4, 5
	}
	ctx := context.Background()
	for _, prune := range []bool{true, false} {
		name := map[bool]string{true: "attach-and-prune", false: "attach-only"}[prune]
		b.Run(name, func(b *testing.B) {
			var lastAttach time.Duration
			var listed, requests int
			for range b.N {
				reg := registrytest.New(b, registrytest.Options{InMemory: true})
				rc, err := registry.New(registry.Options{PlainHTTP: true, MaxRetries: -1})
				if err != nil {
					b.Fatal(err)
				}
				sum, err := rc.Publish(ctx, registry.PublishRequest{Prefix: reg.Host + "/configpub",
					Artifacts: registrytest.Artifacts(artifacts, "prod", 1), Signer: newKey(b)})
				if err != nil {
					b.Fatal(err)
				}
				at := time.Date(2026, 12, 5, 0, 0, 0, 0, time.UTC)
				key := newKey(b)
				keys := trusted(b, key)
				for r := 1; r <= renewals; r++ {
					if r == renewals {
						reg.Reset()
					}
					start := time.Now()
					for _, res := range sum.Results {
						m := signedManifest(b, key, 1, at.Add(time.Duration(r)*5*time.Minute), `"renewal":`+strconv.Itoa(r))
						keep := registry.KeepOptions{Keys: keys}
						if prune {
							keep.Keep = registry.KeepDeliveryManifests
						}
						if at, err := rc.AttachDeliveryManifestKeeping(ctx, res.Ref(), m, keep); err != nil || at.PruneErr != nil {
							b.Fatal(err, at.PruneErr)
						}
					}
					if r == renewals {
						lastAttach += time.Since(start) / time.Duration(artifacts)
						requests += reg.Total() / artifacts
					}
				}
				listed = referrerCount(b, sum.Results[0].Ref())
			}
			b.ReportMetric(float64(lastAttach.Microseconds())/float64(b.N)/1000, "last-renewal-attach-ms/artifact")
			b.ReportMetric(float64(listed), "referrers/artifact")
			b.ReportMetric(float64(requests)/float64(b.N), "last-renewal-requests/artifact")
		})
	}
}

// referrerCount lists, with oras-go as a runtime would, the
// delivery-manifest referrers of the artifact at ref.
func referrerCount(b *testing.B, ref string) int {
	b.Helper()
	ctx := context.Background()
	name, dgst, err := registry.ParseRef(ref)
	if err != nil {
		b.Fatal(err)
	}
	repo, err := remote.NewRepository(name)
	if err != nil {
		b.Fatal(err)
	}
	repo.PlainHTTP = true
	subject, err := repo.Resolve(ctx, dgst.String())
	if err != nil {
		b.Fatal(err)
	}
	n := 0
	if err := repo.Referrers(ctx, subject, registry.DeliveryManifestArtifactType, func(refs []ocispec.Descriptor) error {
		n += len(refs)
		return nil
	}); err != nil {
		b.Fatal(err)
	}
	return n
}
