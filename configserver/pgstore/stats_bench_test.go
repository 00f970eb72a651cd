package pgstore

import (
	"fmt"
	"testing"
	"time"

	"github.com/configpub/configpub/bundle"
	"github.com/configpub/configpub/configserver"
)

// leaseEndsWalk is what Stats did for LeaseEnds before the lease index:
// walk every pointer under the read lock for the earliest lease end per
// environment among the servable ones. Tests hold the index to it.
func leaseEndsWalk(s *Store) map[string]time.Time {
	s.mu.RLock()
	defer s.mu.RUnlock()
	ends := map[string]time.Time{}
	for id, e := range s.pointers {
		if !e.servable() {
			continue
		}
		if end := e.d.LeaseEnd(); !end.IsZero() {
			if cur, ok := ends[id.EnvTag]; !ok || end.Before(cur) {
				ends[id.EnvTag] = end
			}
		}
	}
	return ends
}

// BenchmarkStatsLeaseEnds measures one /metrics scrape's store read of the
// lease ends over 100,000 current pointers in 10 environments: "walk" is
// the walk of every pointer under the read lock Stats used to do, "index"
// is Stats (the lease index: O(environments)). Each run of the benchmark
// runs both, walk first.
func BenchmarkStatsLeaseEnds(b *testing.B) {
	s := &Store{pointers: make(map[bundle.Identity]*entry), artifact: newByteCache(1 << 20)}
	end := time.Date(2026, 12, 6, 9, 0, 0, 0, time.UTC)
	s.install(benchEntries(100_000, end, 1), nil)
	for _, bc := range []struct {
		name string
		ends func() map[string]time.Time
	}{
		{"walk", func() map[string]time.Time { return leaseEndsWalk(s) }},
		{"index", func() map[string]time.Time { return s.Stats().LeaseEnds }},
	} {
		b.Run(bc.name, func(b *testing.B) {
			for range b.N {
				if ends := bc.ends(); len(ends) != 10 || !ends["env-0"].Equal(end) {
					b.Fatalf("lease ends %v", ends)
				}
			}
		})
	}
}

// benchEntries builds n prepared entries in 10 environments, leases
// ending a millisecond apart from end; seq tells renewals apart.
func benchEntries(n int, end time.Time, seq int) []*entry {
	entries := make([]*entry, 0, n)
	for i := range n {
		d := &configserver.Delivery{Identity: bundle.Identity{Host: fmt.Sprintf("h%d", i/100), ServiceID: fmt.Sprintf("svc-%d", i),
			EnvTag: fmt.Sprintf("env-%d", i%10)}, ArtifactDigest: "sha256:" + fmt.Sprintf("%064d", i),
			Manifest: fmt.Appendf(nil, `{"sequence":%d}`, seq), ManifestSignature: "sig", ManifestKeyID: "kid",
			ExpiresAt: end.Add(time.Duration(i) * time.Millisecond).Format(time.RFC3339Nano)}
		d.Prepare()
		entries = append(entries, &entry{d: d})
	}
	return entries
}

// BenchmarkInstallRenewal measures what keeping the lease index costs a
// reload: install (the write lock held) of a renewal of 100,000 pointers
// in 10 environments, each replacing its entry in its environment's heap.
func BenchmarkInstallRenewal(b *testing.B) {
	s := &Store{pointers: make(map[bundle.Identity]*entry), artifact: newByteCache(1 << 20)}
	end := time.Date(2026, 12, 6, 9, 0, 0, 0, time.UTC)
	s.install(benchEntries(100_000, end, 0), nil)
	renewals := make([][]*entry, b.N)
	for i := range b.N {
		renewals[i] = benchEntries(100_000, end.Add(time.Duration(i+1)*5*time.Minute), i+1)
	}
	b.ResetTimer()
	for i := range b.N {
		s.install(renewals[i], nil)
	}
	b.StopTimer()
	if got, want := s.Stats().LeaseEnds["env-0"], end.Add(time.Duration(b.N)*5*time.Minute); !got.Equal(want) {
		b.Fatalf("env-0 lease end %v after %d renewals, want %v", got, b.N, want)
	}
}
