package promote

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/configpub/configpub/bundle"
	"github.com/configpub/configpub/compiler"
	"github.com/configpub/configpub/internal/signing"
	"github.com/configpub/configpub/promote/review"
	"github.com/configpub/configpub/promoter"
	"github.com/configpub/configpub/registry"
	"github.com/configpub/configpub/registry/compiled"
)

// StaleManifestError reports a committed release manifest that is not what
// the sources at its commit compile to (else STALE, nothing changes).
// It matches promoter.ErrStale and compiler.ErrStale.
type StaleManifestError struct {
	Commit string // full hex commit hash
	EnvTag string
	Err    error // the compiler's error naming the first difference
}

func (e *StaleManifestError) Error() string {
	return fmt.Sprintf("promote %s@%s: %v (the commit's %s is not what its sources compile to — sources changed without it, "+
		"or it was edited by hand: run configpub compile --env %s on the branch and commit releases/ with the sources; "+
		"configpub compile --check in pull-request CI refuses such a commit before it is merged)",
		e.EnvTag, short(e.Commit), e.Err, compiler.ManifestPath(e.EnvTag), e.EnvTag)
}

// Unwrap returns promoter.ErrStale and the compiler's error.
func (e *StaleManifestError) Unwrap() []error { return []error{promoter.ErrStale, e.Err} }

func short(h string) string {
	if len(h) > 12 {
		return h[:12]
	}
	return h
}

// releaseInput maps a compile result and its review to the store input;
// its targets are added as they stream (publishAndStore), its archive
// when it is recorded (record).
func releaseInput(rev *review.Review, res *compiler.Result, env string) promoter.ReleaseInput {
	m := res.Manifest
	return promoter.ReleaseInput{
		CommandID:          CommandID(rev.Commit, env),
		EnvTag:             env,
		ReleaseVersion:     m.ReleaseVersion,
		BaseReleaseVersion: m.BaseReleaseVersion,
		ReleaseDigest:      m.ReleaseDigest,
		SourceCommit:       rev.Commit,
		SourceRef:          rev.Ref,
		Actor:              rev.Author.String(),
		Reviewers:          rev.Reviewers,
		Reason:             rev.Subject,
		Rollout:            res.Rollout,
		SourcesDigest:      res.SourcesDigest(),
	}
}

// storeTarget maps one compiled target to the store's: its identity,
// digests, window, inputs and bytes.
func storeTarget(env string, t *compiler.Target) (promoter.Target, error) {
	e := &t.Envelope
	created, err := bundle.ParseTime(e.CreatedAt)
	if err != nil {
		return promoter.Target{}, fmt.Errorf("promote %s: target %s/%s: envelope createdAt %q: %w", env, t.Host, t.ServiceID, e.CreatedAt, promoter.ErrInvalid)
	}
	validFrom, err := bundle.ParseTime(e.ValidFrom)
	if err != nil {
		return promoter.Target{}, fmt.Errorf("promote %s: target %s/%s: envelope validFrom %q: %w", env, t.Host, t.ServiceID, e.ValidFrom, promoter.ErrInvalid)
	}
	expiresAt, err := bundle.ParseTime(e.ExpiresAt)
	if err != nil {
		return promoter.Target{}, fmt.Errorf("promote %s: target %s/%s: envelope expiresAt %q: %w", env, t.Host, t.ServiceID, e.ExpiresAt, promoter.ErrInvalid)
	}
	return promoter.Target{
		Host: t.Host, ServiceID: t.ServiceID, EnvTag: t.EnvTag, Audience: t.Audience,
		SubjectKind: t.SubjectKind, SubjectName: t.SubjectName,
		SnapshotID: t.SnapshotID, PublicationID: t.PublicationID, PolicySnapshotID: t.PolicySnapshotID,
		ReleaseVersion: t.ReleaseVersion, PolicyVersion: t.PolicyVersion,
		PolicyDigest: t.PolicyDigest, ContentDigest: t.ContentDigest,
		PropertySetDigest: t.PropertySetDigest, ArtifactDigest: t.ArtifactDigest,
		SchemaVersion: e.SchemaVersion, CompatibilityGeneration: e.CompatibilityGeneration,
		RevocationEpoch: e.RevocationEpoch, SourceEventSequence: e.SourceEventSequence,
		CreatedAt: created, ValidFrom: validFrom, ExpiresAt: expiresAt,
		Changed: t.Changed, LeaseProfile: t.LeaseProfile,
		Lease:        t.DeliveryLease,
		InputDigests: t.InputDigests,
		Values:       t.Values,
	}, nil
}

// artifactStorer is the part of the store that takes a release's bytes
// ahead of its recording; *promoter.Store has it. With a store that lacks
// it, every target carries its bytes into the recording.
type artifactStorer interface {
	Head(ctx context.Context, envTag string) (head, pending int64, err error)
	StoreArtifacts(ctx context.Context, arts []promoter.Artifact) error
}

var _ artifactStorer = (*promoter.Store)(nil)

// storeClock is the part of the store that tells the time it moves
// pointers at; *promoter.Store has it.
type storeClock interface{ Now() time.Time }

var _ storeClock = (*promoter.Store)(nil)

// closedWindow returns a *promoter.WindowError for the first target of m
// whose snapshot m itself creates and whose activation window does not
// contain now — for a staged release (activated later), whose window ended
// before now — or nil. A snapshot an earlier release created is not
// checked: its pointer may already be at it, and then it does not move.
func closedWindow(m *bundle.Manifest, now time.Time, stage bool) *promoter.WindowError {
	for i := range m.Targets {
		e := &m.Targets[i]
		if e.ReleaseVersion != m.ReleaseVersion || e.ValidFrom == "" || e.ExpiresAt == "" {
			continue
		}
		from, ferr := bundle.ParseTime(e.ValidFrom)
		until, uerr := bundle.ParseTime(e.ExpiresAt)
		if ferr != nil || uerr != nil {
			continue // the recording refuses it, naming the field
		}
		if now.Before(until) && (stage || !now.Before(from)) {
			continue
		}
		return &promoter.WindowError{EnvTag: m.EnvTag, Release: m.ReleaseVersion,
			Identity: e.Host + "/" + e.ServiceID + "/" + m.EnvTag, SnapshotID: e.SnapshotID,
			ValidFrom: from, ExpiresAt: until, At: now.UTC()}
	}
	return nil
}

// artifactBatchBytes is how many bytes of artifacts publishAndStore hands
// the store at once.
const artifactBatchBytes = 16 << 20

// progressInterval is how often a promotion logs its publication's
// progress (and once when every artifact is published).
const progressInterval = 5 * time.Second

// errStopped ends a target stream whose consumer stopped taking targets.
var errStopped = errors.New("stream stopped")

// revocationChecker is the optional part of the store that refuses
// targets whose snapshot is revoked before anything is published;
// *promoter.Store satisfies it.
type revocationChecker interface {
	CheckNotRevoked(ctx context.Context, envTag string, targets []bundle.TargetEntry) error
}

var _ revocationChecker = (*promoter.Store)(nil)

// publishAndStore takes the release's targets one at a time
// (res.EachTarget: a result compiled ManifestOnly is compiled again, host by
// host) and hands each to the registry (PublishSeq: bounded, idempotent) and
// its bytes to the store in batches of about artifactBatchBytes, ahead of
// the recording, keeping only the target's metadata in in.Targets: memory
// holds the artifacts in flight, never every artifact of the release. The
// bytes are stored ahead only when the environment's head is the
// release's base (otherwise the recording replays or loses its
// compare-and-swap, and needs none); then, before anything is published,
// a release whose own snapshots the recording would refuse to activate at
// the store's time (closedWindow; stage: staged, activated later) is
// refused. Every artifact is verified by digest
// against the trusted keys as soon as it is published, while the
// publication goes on (a verification that fails stops it); an artifact
// published before whose signatures are by another key only (after a key
// rotation) is signed with the Signer too (see Resigner). It returns one
// registry.Result per target artifact, in order, then the release's, and
// how many artifacts it signed that way.
func publishAndStore(ctx context.Context, opts Options, log *slog.Logger, clock func() time.Time, res *compiler.Result,
	in *promoter.ReleaseInput, stage bool) (published []registry.Result, signed signedAgain, err error) {
	m := res.Manifest
	// The release artifact is checked now and built again when it is
	// pushed, after every target (not held while they stream).
	if _, err := compiled.Release(res); err != nil {
		return nil, signedAgain{}, fmt.Errorf("promote %s: %w: %w", opts.EnvTag, promoter.ErrInvalid, err)
	}
	storer, _ := opts.Store.(artifactStorer)
	ahead := false
	if storer != nil {
		head, pending, err := storer.Head(ctx, opts.EnvTag)
		if err != nil {
			return nil, signedAgain{}, fmt.Errorf("promote %s: %w", opts.EnvTag, err)
		}
		in.ArtifactsStored = true
		ahead = head == in.BaseReleaseVersion && pending == 0
	}
	if ahead {
		// The recording will happen (no replay, no lost race): refuse now,
		// not after publishing every artifact, a release whose own
		// snapshots it could never activate.
		now := clock()
		if sc, ok := opts.Store.(storeClock); ok {
			now = sc.Now()
		}
		if w := closedWindow(m, now, stage); w != nil {
			return nil, signedAgain{}, fmt.Errorf("promote %s: %w (nothing published)", opts.EnvTag, w)
		}
		// A release that keeps a revoked snapshot is refused by the
		// recording; refused now, its tags are not pushed either — a
		// corrected release of the same number met them as a conflict.
		if rc, ok := opts.Store.(revocationChecker); ok {
			if err := rc.CheckNotRevoked(ctx, in.EnvTag, m.Targets); err != nil {
				return nil, signedAgain{}, fmt.Errorf("promote %s: %w (nothing published)", opts.EnvTag, err)
			}
		}
	}
	if ks, ok := opts.Store.(signingKeyStore); ok {
		// Recorded before anything is signed with it, so that a later
		// promotion under another key knows its signatures.
		if err := ks.RecordSigningKey(ctx, opts.Signer.Public()); err != nil {
			return nil, signedAgain{}, fmt.Errorf("promote %s: %w (nothing published)", opts.EnvTag, err)
		}
	}
	v, err := startVerifier(ctx, opts, m.ReleaseVersion)
	if err != nil {
		return nil, signedAgain{}, err
	}
	published, err = publishVerified(v.ctx, opts, log, clock, res, in, storer, ahead, v)
	if verr := v.wait(); verr != nil {
		return nil, signedAgain{}, verr // the cause, when the publication stopped for it
	}
	if err != nil {
		return nil, signedAgain{}, err
	}
	return published, v.signedAgain(), nil
}

// signedAgain counts the artifacts published before that a promotion
// signed with its key: Resigned those signed under another key only (after
// a key rotation: a key the store recorded, or any when it records none),
// RotatedFrom naming the recorded keys that had signed them; Replaced
// those signed by no key the store recorded; Unsigned those that carried
// no signature at all.
type signedAgain struct {
	Resigned, Replaced, Unsigned int64
	RotatedFrom                  []string
}

// publishVerified is publishAndStore's publication, handing each completed
// artifact to v. storer is nil when the store takes every target's bytes in
// the recording; ahead: hand them to storer now.
func publishVerified(ctx context.Context, opts Options, log *slog.Logger, clock func() time.Time, res *compiler.Result,
	in *promoter.ReleaseInput, storer artifactStorer, ahead bool, v *verifier) ([]registry.Result, error) {
	m := res.Manifest
	var (
		batch     []promoter.Artifact
		batchSize int
	)
	flush := func() error {
		if len(batch) == 0 {
			return nil
		}
		err := storer.StoreArtifacts(ctx, batch)
		clear(batch)
		batch, batchSize = batch[:0], 0
		if err != nil {
			return fmt.Errorf("promote %s release %d: %w", opts.EnvTag, m.ReleaseVersion, err)
		}
		return nil
	}
	var (
		mu      sync.Mutex
		results = make(map[string]registry.Result, len(m.Targets)) // by repository
		ids     = map[string]bundle.Identity{}                     // by repository, until verification is queued
		release *registry.Result
		done    int // artifacts published, the release's included
		pushed  int
		last    = clock()
	)
	total := len(m.Targets) + 1
	buildRelease := func() (*registry.Release, error) { return compiled.Release(res) }
	req := registry.PublishRequest{Prefix: opts.RegistryPrefix, ReleaseFrom: buildRelease, Signer: opts.Signer, Progress: func(r registry.Result) {
		mu.Lock()
		done++
		if r.Pushed {
			pushed++
		}
		job := verifyJob{r: r}
		if r.Kind == registry.KindRelease {
			release = &r
		} else {
			results[r.Repository] = r
			id, ok := ids[r.Repository]
			job.id, job.unknown = &id, !ok
			delete(ids, r.Repository)
		}
		if done == total || clock().Sub(last) >= progressInterval {
			last = clock()
			log.InfoContext(ctx, "publishing", "artifacts", done, "of", total, "pushed", pushed, "verified", v.verified.Load())
		}
		mu.Unlock()
		v.add(job) // waits while the verifications fall behind
	}}
	in.Targets = make([]promoter.Target, 0, len(m.Targets))
	targets := func(yield func(registry.Artifact, error) bool) {
		err := res.EachTarget(ctx, func(t *compiler.Target) error {
			st, err := storeTarget(opts.EnvTag, t)
			if err != nil {
				return err
			}
			a, err := compiled.Artifact(t)
			if err != nil {
				return fmt.Errorf("promote %s: %w: %w", opts.EnvTag, promoter.ErrInvalid, err)
			}
			want, err := registry.ManifestDigest(a)
			if err != nil {
				return fmt.Errorf("promote %s: %w", opts.EnvTag, err)
			}
			repo := registry.Repository(opts.RegistryPrefix, a)
			st.OCIReference, st.OCIManifestDigest = repo+"@"+want.String(), want.String()
			// The signature itself is randomised (ECDSA); its location is
			// deterministic, so a re-run hashes to the same command.
			st.OCISignature = repo + ":" + registry.SignatureTag(want)
			if storer != nil {
				st.Values = nil
			}
			mu.Lock()
			ids[repo] = bundle.Identity{Host: st.Host, ServiceID: st.ServiceID, EnvTag: st.EnvTag}
			mu.Unlock()
			if ahead {
				batch = append(batch, promoter.Artifact{Digest: st.ArtifactDigest, MediaType: st.MediaType, Bytes: t.Values})
				if batchSize += len(t.Values); batchSize >= artifactBatchBytes {
					if err := flush(); err != nil {
						return err
					}
				}
			}
			in.Targets = append(in.Targets, st)
			if !yield(a, nil) {
				return errStopped
			}
			return nil
		})
		if err != nil && !errors.Is(err, errStopped) {
			yield(registry.Artifact{}, err)
		}
	}
	_, err := opts.Registry.PublishSeq(ctx, req, targets)
	if errors.Is(err, registry.ErrConflict) {
		// A tag r<N> already names other content: another release N was
		// published first. That is a lost compare-and-swap too.
		return nil, fmt.Errorf("promote %s release %d: %w: %w", opts.EnvTag, m.ReleaseVersion, promoter.ErrConflict, err)
	}
	if err != nil {
		return nil, fmt.Errorf("promote %s release %d: %w", opts.EnvTag, m.ReleaseVersion, err)
	}
	if err := flush(); err != nil {
		return nil, err
	}
	published := make([]registry.Result, 0, len(in.Targets)+1)
	for i := range in.Targets {
		t := &in.Targets[i]
		repo, _, _ := strings.Cut(t.OCIReference, "@")
		r, ok := results[repo]
		if !ok || r.Digest != t.OCIManifestDigest {
			return nil, fmt.Errorf("promote %s: published %q for %s/%s, want manifest %s: %w", opts.EnvTag, r.Ref(), t.Host, t.ServiceID, t.OCIManifestDigest, promoter.ErrIntegrity)
		}
		published = append(published, r)
	}
	if release == nil {
		return nil, fmt.Errorf("promote %s release %d: the release artifact was not published: %w", opts.EnvTag, m.ReleaseVersion, promoter.ErrIntegrity)
	}
	published = append(published, *release)
	return published, nil
}

// verifier verifies published artifacts by digest against the trusted
// keys (the Signer's public key by default) while the publication goes on:
// each as soon as it is published, on verifyConcurrency workers, so that
// a large release is read back while the registry has it at hand rather
// than in a second pass after the last push.
type verifier struct {
	opts     Options
	release  int64
	keys     []signing.TrustedKey
	queue    chan verifyJob
	g        *errgroup.Group
	ctx      context.Context // cancelled once a verification fails
	verified atomic.Int64
	// resigner signs, with the Signer, artifacts published before under
	// another key; nil unless the Signer's key is among the trusted keys
	// and the Registry can sign.
	resigner Resigner
	resigned atomic.Int64
	unsigned atomic.Int64 // artifacts found without any signature, signed
	// recorded are the keys the store recorded as it signed, other than
	// the trusted ones (nil: a store that records none, which cannot tell
	// a key rotation from a replaced signature); replaced counts the
	// artifacts signed by none of them or the trusted keys, and rotatedFrom
	// the recorded keys that had signed the others.
	recorded    []signing.TrustedKey
	replaced    atomic.Int64
	rotatedMu   sync.Mutex
	rotatedFrom map[string]bool
}

// signedAgain is what v signed of the artifacts published before.
func (v *verifier) signedAgain() signedAgain {
	v.rotatedMu.Lock()
	defer v.rotatedMu.Unlock()
	ids := make([]string, 0, len(v.rotatedFrom))
	for id := range v.rotatedFrom {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	return signedAgain{Resigned: v.resigned.Load(), Replaced: v.replaced.Load(), Unsigned: v.unsigned.Load(), RotatedFrom: ids}
}

// verifyJob is one published artifact to verify: a target's, with the
// identity its envelope must name (unknown: the publication reported an
// artifact no target asked for), or the release artifact (id nil).
type verifyJob struct {
	r       registry.Result
	id      *bundle.Identity
	unknown bool
}

func startVerifier(ctx context.Context, opts Options, release int64) (*verifier, error) {
	keys := opts.TrustedKeys
	if len(keys) == 0 {
		pub, ok := opts.Signer.Public().(*ecdsa.PublicKey)
		if !ok {
			return nil, fmt.Errorf("promote %s: signer is not an ECDSA key: %w", opts.EnvTag, promoter.ErrInvalid)
		}
		k, err := signing.NewTrustedKey(pub)
		if err != nil {
			return nil, fmt.Errorf("promote %s: signer: %w", opts.EnvTag, err)
		}
		keys = []signing.TrustedKey{k}
	}
	g, gctx := errgroup.WithContext(ctx)
	v := &verifier{opts: opts, release: release, keys: keys, queue: make(chan verifyJob, verifyQueue), g: g, ctx: gctx}
	if rs, ok := opts.Registry.(Resigner); ok && trustsSigner(keys, opts.Signer) {
		v.resigner = rs
		if ks, ok := opts.Store.(signingKeyStore); ok {
			recorded, err := ks.SigningKeys(ctx)
			if err != nil {
				return nil, fmt.Errorf("promote %s: %w", opts.EnvTag, err)
			}
			v.recorded, v.rotatedFrom = untrusted(recorded, keys), map[string]bool{}
			if len(recorded) == 0 {
				v.recorded = nil // a database before migration 29
			} else if v.recorded == nil {
				v.recorded = []signing.TrustedKey{}
			}
		}
	}
	for range verifyConcurrency {
		g.Go(func() error {
			for j := range v.queue {
				if err := v.verify(gctx, j); err != nil {
					return err
				}
				v.verified.Add(1)
			}
			return nil
		})
	}
	return v, nil
}

// add queues a published artifact for verification, waiting while
// verifyQueue artifacts wait; after a verification failed it drops it.
func (v *verifier) add(j verifyJob) {
	select {
	case v.queue <- j:
	case <-v.ctx.Done():
	}
}

// wait verifies what is queued and returns the first failure.
func (v *verifier) wait() error {
	close(v.queue)
	return v.g.Wait()
}

func (v *verifier) verify(ctx context.Context, j verifyJob) error {
	if j.unknown {
		return fmt.Errorf("promote %s: published %s, which no target of release %d names: %w", v.opts.EnvTag, j.r.Ref(), v.release, promoter.ErrIntegrity)
	}
	opts := registry.VerifyOptions{Keys: v.keys, Identity: j.id}
	got, err := v.opts.Registry.Verify(ctx, j.r.Ref(), opts)
	if errors.Is(err, registry.ErrSignature) && v.resigner != nil && !j.r.Pushed {
		// Published before under another key: after a key rotation the
		// artifact of every target the release did not change carries the
		// old key's signature only. It is our own content (its digest is
		// what this commit compiles to), so sign it too, and verify again.
		// One that carries no signature at all was not signed under
		// another key: its signature was deleted from the registry (or
		// never pushed). It is counted apart, for the operator to look
		// into.
		//
		// A signature by a key the store recorded as it signed, one it no
		// longer trusts, is a key rotation; one by no key the store
		// recorded was put there by someone else, replacing the store's
		// (the content is still ours: it is signed all the same, and
		// counted apart). A store that records no keys cannot tell them
		// apart and counts both as a rotation.
		unsigned := errors.Is(err, registry.ErrUnsigned)
		rotatedFrom := ""
		if !unsigned && len(v.recorded) > 0 {
			old, oerr := v.opts.Registry.Verify(ctx, j.r.Ref(), registry.VerifyOptions{Keys: v.recorded, Identity: j.id})
			switch {
			case oerr == nil:
				rotatedFrom = old.KeyID
			case !errors.Is(oerr, registry.ErrSignature):
				return fmt.Errorf("promote %s release %d: %w", v.opts.EnvTag, v.release, oerr)
			}
		}
		replaced := !unsigned && v.recorded != nil && rotatedFrom == ""
		var added bool
		if added, err = v.resigner.Sign(ctx, j.r.Ref(), v.opts.Signer); err != nil {
			return fmt.Errorf("promote %s release %d: %w", v.opts.EnvTag, v.release, err)
		}
		switch {
		case added && unsigned:
			v.unsigned.Add(1)
		case added && replaced:
			v.replaced.Add(1)
		case added:
			v.resigned.Add(1)
			if rotatedFrom != "" {
				v.rotatedMu.Lock()
				v.rotatedFrom[rotatedFrom] = true
				v.rotatedMu.Unlock()
			}
		}
		got, err = v.opts.Registry.Verify(ctx, j.r.Ref(), opts)
	}
	if err != nil {
		return fmt.Errorf("promote %s release %d: %w", v.opts.EnvTag, v.release, err)
	}
	if got.Digest != j.r.Digest {
		return fmt.Errorf("promote %s: verified %s, want %s: %w", v.opts.EnvTag, got.Ref(), j.r.Ref(), promoter.ErrIntegrity)
	}
	return nil
}

// verifyConcurrency bounds the artifacts verified at once; verifyQueue how
// many published artifacts wait for a verifier before the publication
// waits for them.
const (
	verifyConcurrency = 8
	verifyQueue       = 1024
)

// Resigner adds the signing key's signature to an artifact published before
// under another key; *registry.Client satisfies it. Without it, the first
// promotion after a key rotation stops at the first artifact signed by the
// old key only.
type Resigner interface {
	Sign(ctx context.Context, ref string, signer crypto.Signer) (bool, error)
}

var _ Resigner = (*registry.Client)(nil)

// signingKeyStore records and lists the keys the store signs with;
// *promoter.Store satisfies it. With it, promote records its Signer's key
// before it signs an artifact, and tells an artifact signed before by a
// key the store recorded (a key rotation) from one whose signature is by
// a key it never recorded (replaced in the registry).
type signingKeyStore interface {
	RecordSigningKey(ctx context.Context, pub crypto.PublicKey) error
	SigningKeys(ctx context.Context) ([]promoter.SigningKey, error)
}

var _ signingKeyStore = (*promoter.Store)(nil)

// untrusted returns the recorded keys that are not among keys.
func untrusted(recorded []promoter.SigningKey, keys []signing.TrustedKey) []signing.TrustedKey {
	var out []signing.TrustedKey
	for _, k := range recorded {
		if !slices.ContainsFunc(keys, func(t signing.TrustedKey) bool { return t.ID == k.ID }) {
			out = append(out, k.TrustedKey)
		}
	}
	return out
}

// trustsSigner reports whether signer's public key is among keys.
func trustsSigner(keys []signing.TrustedKey, signer crypto.Signer) bool {
	id, err := signing.KeyID(signer.Public())
	if err != nil {
		return false
	}
	for _, k := range keys {
		if k.ID == id {
			return true
		}
	}
	return false
}
