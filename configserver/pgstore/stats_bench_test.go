package pgstore

import (
	"fmt"
	"testing"
	"time"

	"github.com/configpub/configpub/bundle"
	"github.com/configpub/configpub/configserver"
)

// BenchmarkStatsLeaseEnds measures Stats (one /metrics scrape's store
// read) over 100,000 current pointers in 10 environments: it walks every
// pointer, holding the read lock, for the earliest lease end per
// environment.
func BenchmarkStatsLeaseEnds(b *testing.B) {
	s := &Store{pointers: make(map[bundle.Identity]*entry), artifact: newByteCache(1 << 20)}
	end := time.Date(2026, 12, 6, 9, 0, 0, 0, time.UTC)
	for i := range 100_000 {
		d := &configserver.Delivery{Identity: bundle.Identity{Host: fmt.Sprintf("h%d", i/100), ServiceID: fmt.Sprintf("svc-%d", i),
			EnvTag: fmt.Sprintf("env-%d", i%10)}, ArtifactDigest: "sha256:" + fmt.Sprintf("%064d", i),
			Manifest: []byte(`{"sequence":1}`), ManifestSignature: "sig", ManifestKeyID: "kid",
			ExpiresAt: end.Add(time.Duration(i) * time.Millisecond).Format(time.RFC3339Nano)}
		d.Prepare()
		s.pointers[d.Identity] = &entry{d: d}
	}
	b.ResetTimer()
	for range b.N {
		if st := s.Stats(); len(st.LeaseEnds) != 10 || !st.LeaseEnds["env-0"].Equal(end) {
			b.Fatalf("lease ends %v", st.LeaseEnds)
		}
	}
}
