package client

import (
	"fmt"
	"net/url"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/configpub/configpub/bundle"
)

// Source says where a snapshot or an evidence record came from.
type Source string

// Sources.
const (
	SourceServer Source = "server" // GET /configs
	SourceCache  Source = "cache"  // the last-known-good file in CacheDir
	SourceOCI    Source = "oci"    // an artifact pulled by digest from an OCI registry
)

// Snapshot is one verified configuration. It is immutable once published by
// the Client: readers must not modify it (including Values and the maps).
type Snapshot struct {
	Values    []byte               // exact values.yml bytes; ArtifactDigest = sha256(Values)
	Envelope  bundle.RuntimePolicy // the runtimePolicy envelope
	Namespace map[string]any       // the audience namespace (agentPolicy, gatewayPolicy or knowledgePolicy), JSON-compatible
	Settings  map[string]any       // the flat settings properties ("server.httpsPort": 8443); nil when none

	Manifest      *bundle.DeliveryManifest // the signed delivery manifest
	ManifestBytes []byte                   // its exact canonical bytes
	Signature     string                   // base64 ECDSA signature over ManifestBytes
	KeyID         string                   // id of the trusted key that verified it

	SnapshotID     string
	PublicationID  string
	PolicyDigest   string
	ContentDigest  string
	ArtifactDigest string

	Source       Source
	VerifiedAt   time.Time
	RefreshAfter time.Time // refresh no later than this (the signed lease's refreshAfter)
	ExpiresAt    time.Time // the signed lease's end; fail closed at ExpiresAt + skew
}

// Client loads, verifies and holds a runtime's configuration. It is safe for
// concurrent use: Load, Restore and ApplyOCI are serialized; Current and
// Guard never block on them and never see a partial state.
type Client struct {
	opts       Options
	configsURL string // GET <ServerURL>/configs?envTag=&host=&serviceId=

	cur atomic.Pointer[active]
	// trusted is the set of trusted keys in use: Options.TrustedKeys until
	// SetTrustedKeys replaces it.
	trusted atomic.Pointer[[]TrustedKey]

	mu         sync.Mutex // serializes loads; guards the fields below
	seen       seenSet    // per trusted signing key id
	seenLoaded bool       // the seen-state file has been read
	// seenOnDisk is the seen state the seen-state file holds, as last read
	// or written: what a restarted client would hold against replays.
	seenOnDisk seenSet
	restored   bool
	// heldOnDisk is the last-known-good Restore found verified but for its
	// lease, which ran out; nil when none.
	heldOnDisk    *position
	lkgSnapshotID string   // snapshot last persisted as (or restored from) the last-known-good
	controlKeys   []string // key ids of the status handler's control keys: never trusted for manifests
	faults        faults

	st statusState // what the status endpoint and metrics report

	// answer is what the server last said about the current snapshot, for
	// the pinned sessions on it (Pinned.Snapshot).
	answer answerState

	// keysChanged wakes Watch (a held request, or its wait for the next
	// one) when SetTrustedKeys changed the trusted keys: a load under the
	// new set follows at once.
	keysChanged chan struct{}
}

// active is the published current snapshot with its deadlines.
type active struct {
	snap *Snapshot
	// deadline is ExpiresAt + skew expressed relative to the clock reading
	// taken at verification: with the system clock it carries a monotonic
	// reading, so stepping the wall clock back cannot extend the lease.
	deadline time.Time
	// wallDeadline is ExpiresAt + skew on the wall clock: stepping the wall
	// clock forward past it fails closed too.
	wallDeadline time.Time
}

// faults injects failures that cannot be caused for real in a test (a crash
// between writing and renaming the last-known-good file). Zero = none.
type faults struct {
	beforeRename func() error
}

// New validates opts and returns a Client. It does no I/O: the last-known-good
// is restored by the first Load (or an explicit Restore). It refuses to start
// without a trusted key (ErrNoTrustedKey).
func New(opts Options) (*Client, error) {
	if err := opts.validate(); err != nil {
		return nil, fmt.Errorf("new config client: %w", err)
	}
	opts = opts.withDefaults()
	id := opts.Identity
	q := url.Values{"host": {id.Host}, "serviceId": {id.ServiceID}, "envTag": {id.EnvTag}}
	c := &Client{opts: opts, configsURL: opts.ServerURL + "/configs?" + q.Encode(), keysChanged: make(chan struct{}, 1)}
	c.trusted.Store(&opts.TrustedKeys)
	return c, nil
}

// trustedKeys returns the trusted keys in use.
func (c *Client) trustedKeys() []TrustedKey { return *c.trusted.Load() }

// SetTrustedKeys replaces the trusted keys while the client runs, as a
// restart with the new Options.TrustedKeys would (what a `configpub fetch
// --watch` sidecar does when its trust file changes): the next load verifies
// with the new set, and what a key no longer trusted signed stops counting at
// once — its replay floor is dropped, a current snapshot whose lease it
// signed is no longer current (Current answers ErrNoSnapshot until a load
// verifies one under the new set), and a last-known-good it signed is
// refused on restore. A running Watch ends its held request and loads
// under the new set at once. Rotate by adding the new key first and removing the
// old one only after the last lease it signed has expired. An empty set, a
// key whose id is not its own, or a status handler's control key is refused
// and nothing changes.
func (c *Client) SetTrustedKeys(keys []TrustedKey) error {
	if err := validateTrustedKeys(keys); err != nil {
		return fmt.Errorf("set trusted keys: %w", err)
	}
	keys = append([]TrustedKey(nil), keys...)
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, k := range keys {
		if slices.Contains(c.controlKeys, k.ID) {
			return fmt.Errorf("set trusted keys: key %s is a status handler's control key; use a key of its own", k.ID)
		}
	}
	c.trusted.Store(&keys)
	// Keep only what the trusted keys signed (persisted when the
	// client has a cache directory, as after a restart).
	if err := c.commitSeen(c.seen); err != nil {
		c.opts.Logger.Warn("config client: seen state not rewritten after a trusted-key change", "err", err)
	}
	if s := c.current(); s != nil && !slices.ContainsFunc(keys, func(k TrustedKey) bool { return k.ID == s.KeyID }) {
		c.cur.Store(nil)
		c.opts.Logger.Warn("config client: the current snapshot's lease was signed by a key no longer trusted; not serving it",
			"snapshot", s.SnapshotID, "key", s.KeyID)
	}
	select {
	case c.keysChanged <- struct{}{}: // a running Watch loads at once
	default:
	}
	return nil
}

// Current returns the current verified snapshot, or fails closed: ErrNoSnapshot
// before the first successful load, ErrExpired once its lease (plus skew) has
// run out.
func (c *Client) Current() (*Snapshot, error) {
	a := c.cur.Load()
	if a == nil {
		return nil, ErrNoSnapshot
	}
	now := c.opts.Clock.Now()
	if !now.Before(a.deadline) || !now.Before(a.wallDeadline) {
		return nil, fmt.Errorf("snapshot %s expired at %s: %w", a.snap.SnapshotID, a.snap.ExpiresAt.UTC().Format(time.RFC3339), ErrExpired)
	}
	return a.snap, nil
}

// Guard returns nil while a verified, unexpired snapshot is current and the
// fail-closed error of Current otherwise. Call it before every protected
// operation.
func (c *Client) Guard() error {
	_, err := c.Current()
	return err
}

// publish swaps s in atomically.
func (c *Client) publish(s *Snapshot, now time.Time) {
	end := s.ExpiresAt.Add(c.opts.Skew)
	c.cur.Store(&active{snap: s, deadline: now.Add(end.Sub(now)), wallDeadline: end})
}

// current returns the published snapshot regardless of its lease.
func (c *Client) current() *Snapshot {
	if a := c.cur.Load(); a != nil {
		return a.snap
	}
	return nil
}
