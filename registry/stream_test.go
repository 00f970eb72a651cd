package registry_test

import (
	"bytes"
	"context"
	"errors"
	"iter"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/configpub/configpub/internal/registrytest"
	"github.com/configpub/configpub/registry"
)

// TestPublishSeqStreamsBoundedAndRepublishesWithOneHeadEach publishes 60
// generated artifacts and a release through PublishSeq: at no time are
// more than Concurrency artifacts taken from the sequence and not yet
// done (the stream is bounded), every artifact verifies, and an unchanged
// re-publish writes nothing and costs exactly one request per artifact.
func TestPublishSeqStreamsBoundedAndRepublishesWithOneHeadEach(t *testing.T) {
	t.Parallel()
	reg := registrytest.New(t, registrytest.Options{})
	const n, conc = 60, 4
	c := newClient(t, registry.Options{Concurrency: conc})
	key := newKey(t)
	ctx := context.Background()
	prefix := reg.Host + "/stream"
	var mu sync.Mutex
	taken, done, maxOpen := 0, 0, 0
	counting := func(seq iter.Seq2[registry.Artifact, error]) iter.Seq2[registry.Artifact, error] {
		return func(yield func(registry.Artifact, error) bool) {
			for a, err := range seq {
				mu.Lock()
				taken++
				maxOpen = max(maxOpen, taken-done)
				mu.Unlock()
				if !yield(a, err) {
					return
				}
			}
		}
	}
	req := registry.PublishRequest{Prefix: prefix, Signer: key,
		Release:  &registry.Release{EnvTag: "prod", ReleaseVersion: 1, Manifest: []byte(`{"release":1}`)},
		Progress: func(registry.Result) { mu.Lock(); done++; mu.Unlock() }}
	sum, err := c.PublishSeq(ctx, req, counting(registrytest.ArtifactSeq(n, "prod", 1)))
	if err != nil {
		t.Fatal(err)
	}
	if sum.Pushed != n+1 || sum.AlreadyPresent != 0 || len(sum.Results) != 0 {
		t.Fatalf("got %d pushed, %d present, %d listed; want %d pushed, none listed", sum.Pushed, sum.AlreadyPresent, len(sum.Results), n+1)
	}
	// One artifact may be packed while conc are in flight.
	if maxOpen > conc+1 {
		t.Fatalf("%d artifacts were taken and not done at once, want at most %d", maxOpen, conc+1)
	}
	for _, a := range registrytest.Artifacts(n, "prod", 1) {
		d, err := registry.ManifestDigest(a)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.Verify(ctx, registry.Repository(prefix, a)+"@"+d.String(), registry.VerifyOptions{Keys: trusted(t, key)}); err != nil {
			t.Fatalf("verify %s/%s: %v", a.Host, a.ServiceID, err)
		}
	}

	reg.Reset()
	again, err := c.PublishSeq(ctx, req, registrytest.ArtifactSeq(n, "prod", 1))
	if err != nil {
		t.Fatal(err)
	}
	if again.Pushed != 0 || again.AlreadyPresent != n+1 {
		t.Fatalf("re-publish: got %d pushed, %d present, want 0 and %d", again.Pushed, again.AlreadyPresent, n+1)
	}
	if reg.Writes() != 0 || reg.Total() != n+1 {
		t.Fatalf("re-publish: %d writes, %d requests (%v), want 0 writes and %d requests", reg.Writes(), reg.Total(), reg.Counts(), n+1)
	}
}

// TestPublishSeqFailureMidStreamThenReRunCompletes takes the registry down
// while the 25th artifact is taken from the stream: the publication fails
// clearly, every artifact reported done is complete and signed, and a
// re-run pushes the rest and finds the done ones present.
func TestPublishSeqFailureMidStreamThenReRunCompletes(t *testing.T) {
	t.Parallel()
	var fi *registrytest.FaultInjector
	reg := registrytest.New(t, registrytest.Options{Wrap: func(h http.Handler) http.Handler {
		fi = registrytest.NewFaultInjector(h)
		return fi
	}})
	const n = 50
	c := newClient(t, registry.Options{Concurrency: 4, MaxRetries: 1, RetryMinWait: time.Millisecond, RetryMaxWait: time.Millisecond})
	key := newKey(t)
	ctx := context.Background()
	prefix := reg.Host + "/midway"
	var done []registry.Result
	var mu sync.Mutex
	req := registry.PublishRequest{Prefix: prefix, Signer: key,
		Progress: func(r registry.Result) { mu.Lock(); done = append(done, r); mu.Unlock() }}
	failing := func(yield func(registry.Artifact, error) bool) {
		i := 0
		for a := range registrytest.ArtifactSeq(n, "prod", 1) {
			if i == 25 {
				fi.SetDown(true)
			}
			i++
			if !yield(a, nil) {
				return
			}
		}
	}
	sum, err := c.PublishSeq(ctx, req, failing)
	if err == nil || !strings.Contains(err.Error(), "503") {
		t.Fatalf("got %v, want the registry's 503", err)
	}
	fi.SetDown(false)
	if sum.Pushed != len(done) || len(done) >= n {
		t.Fatalf("got %d pushed, %d reported done, want the same and fewer than %d", sum.Pushed, len(done), n)
	}
	for _, r := range done {
		if _, err := c.Verify(ctx, r.Ref(), registry.VerifyOptions{Keys: trusted(t, key)}); err != nil {
			t.Fatalf("reported done but not complete: %s: %v", r.Ref(), err)
		}
	}
	req.Progress = nil
	again, err := c.PublishSeq(ctx, req, registrytest.ArtifactSeq(n, "prod", 1))
	if err != nil {
		t.Fatal(err)
	}
	if again.AlreadyPresent < len(done) || again.Pushed+again.AlreadyPresent != n {
		t.Fatalf("re-run: %d pushed, %d present, want all %d with at least the %d done before present", again.Pushed, again.AlreadyPresent, n, len(done))
	}
}

// TestPublishSeqStopsAtTheSequencesErrorAndAnInvalidArtifact: an error the
// sequence yields, or an artifact that does not hash to its digest, ends
// the publication with an error naming it; what was published before it
// stays complete.
func TestPublishSeqStopsAtTheSequencesErrorAndAnInvalidArtifact(t *testing.T) {
	t.Parallel()
	reg := registrytest.New(t, registrytest.Options{})
	c := newClient(t, registry.Options{Concurrency: 2})
	key := newKey(t)
	ctx := context.Background()
	errSource := errors.New("compile failed at host 3")
	bad := func(corrupt bool) iter.Seq2[registry.Artifact, error] {
		return func(yield func(registry.Artifact, error) bool) {
			i := 0
			for a := range registrytest.ArtifactSeq(6, "prod", 1) {
				if i == 3 {
					if !corrupt {
						yield(registry.Artifact{}, errSource)
						return
					}
					a.Values = append([]byte(nil), a.Values...)
					a.Values[0] ^= 1
				}
				i++
				if !yield(a, nil) {
					return
				}
			}
		}
	}
	for _, tc := range []struct {
		name    string
		corrupt bool
		want    error
	}{{"source error", false, errSource}, {"invalid artifact", true, registry.ErrDigestMismatch}} {
		sum, err := c.PublishSeq(ctx, registry.PublishRequest{Prefix: reg.Host + "/bad" + map[bool]string{true: "a", false: "b"}[tc.corrupt], Signer: key}, bad(tc.corrupt))
		if !errors.Is(err, tc.want) || !strings.Contains(err.Error(), "artifact 3") {
			t.Fatalf("%s: got %v, want %v naming artifact 3", tc.name, err, tc.want)
		}
		if sum.Pushed > 3 {
			t.Fatalf("%s: got %d pushed, want at most the 3 before it", tc.name, sum.Pushed)
		}
	}
	if _, err := c.PublishSeq(ctx, registry.PublishRequest{Prefix: reg.Host + "/x", Signer: key, Artifacts: registrytest.Artifacts(1, "prod", 1)},
		registrytest.ArtifactSeq(1, "prod", 1)); !errors.Is(err, registry.ErrInvalid) {
		t.Fatalf("artifacts in both the request and the sequence: got %v, want ErrInvalid", err)
	}
}

// TestProgressPrintsAtMostOncePerInterval feeds 1,000 results over a
// simulated 10.5 s with a 2 s interval: five lines plus the final one, the
// last with the totals.
func TestProgressPrintsAtMostOncePerInterval(t *testing.T) {
	t.Parallel()
	start := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	now := start
	var out bytes.Buffer
	p := registry.NewProgress(&out, 1000, 2*time.Second, func() time.Time { return now })
	for i := range 1000 {
		now = start.Add(time.Duration(i) * 10500 * time.Millisecond / 1000)
		p.Report(registry.Result{Pushed: i%4 != 0})
	}
	p.Finish()
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 6 {
		t.Fatalf("got %d lines:\n%s\nwant 6", len(lines), out.String())
	}
	if want := "publish: 1000/1000 artifacts (750 pushed, 250 already present) 95/s"; lines[5] != want {
		t.Fatalf("got final line %q, want %q", lines[5], want)
	}
}

// TestPublishSeqBuildsTheReleaseLast: with ReleaseFrom, the release
// artifact is built once, when every target is complete, and published
// as the one Release would give; a request with both Release and
// ReleaseFrom is refused before anything is pushed.
func TestPublishSeqBuildsTheReleaseLast(t *testing.T) {
	t.Parallel()
	reg := registrytest.New(t, registrytest.Options{})
	const n = 12
	c := newClient(t, registry.Options{Concurrency: 3})
	key := newKey(t)
	ctx := context.Background()
	rel := &registry.Release{EnvTag: "prod", ReleaseVersion: 1, Manifest: []byte(`{"release":1}`), CreatedAt: time.Unix(0, 0).UTC()}
	var mu sync.Mutex
	done, built, doneWhenBuilt := 0, 0, -1
	req := registry.PublishRequest{Prefix: reg.Host + "/later", Signer: key,
		ReleaseFrom: func() (*registry.Release, error) {
			mu.Lock()
			defer mu.Unlock()
			built++
			doneWhenBuilt = done
			return rel, nil
		},
		Progress: func(registry.Result) { mu.Lock(); done++; mu.Unlock() }}
	sum, err := c.PublishSeq(ctx, req, registrytest.ArtifactSeq(n, "prod", 1))
	if err != nil {
		t.Fatal(err)
	}
	if built != 1 || doneWhenBuilt != n || sum.Pushed != n+1 {
		t.Fatalf("release built %d times, after %d of %d targets; %d pushed; want once, after all, %d pushed", built, doneWhenBuilt, n, sum.Pushed, n+1)
	}
	r, ok, err := c.Published(ctx, reg.Host+"/later", *rel)
	if err != nil || !ok || r.Kind != registry.KindRelease {
		t.Fatalf("release artifact built last: published %v (%+v), %v", ok, r, err)
	}

	reg.Reset()
	req.Release, req.Prefix = rel, reg.Host+"/both"
	if _, err := c.PublishSeq(ctx, req, registrytest.ArtifactSeq(n, "prod", 1)); !errors.Is(err, registry.ErrInvalid) || reg.Writes() != 0 {
		t.Fatalf("Release and ReleaseFrom: %v, %d writes; want ErrInvalid and nothing written", err, reg.Writes())
	}
}
