package configserver

import (
	"context"
	"time"

	"github.com/configpub/configpub/bundle"
)

// Store is what the handler needs from the configuration store. Current must
// answer from memory when it can and return ErrUnavailable, quickly, when it
// cannot confirm what is current; ErrNotFound when the identity has no
// current pointer; ErrGone when the identity is retired.
type Store interface {
	// Current returns the delivery that is current for id.
	Current(ctx context.Context, id bundle.Identity) (*Delivery, error)
	// Snapshot returns a historical snapshot of id. A snapshot that does not
	// exist and one that belongs to another identity are both ErrNotFound.
	Snapshot(ctx context.Context, id bundle.Identity, snapshotID string) (*Delivery, error)
	// RecordEvidence appends a runtime's APPLIED/REJECTED report. A
	// snapshot id that is not one of the identity's (with the evidence's
	// audience), or a publication that is not the snapshot's, is
	// ErrInvalidEvidence and nothing is stored.
	RecordEvidence(ctx context.Context, ev *Evidence) error
	// Ready reports nil when the store can serve current pointers. Its
	// error is the reason /readyz answers (unauthenticated), so it names
	// no secret.
	Ready(ctx context.Context) error
}

// StatsReporter is implemented by stores that expose counters for /metrics.
type StatsReporter interface {
	Stats() StoreStats
}

// StoreStats are cumulative store counters and gauges.
type StoreStats struct {
	ArtifactCacheHits   uint64
	ArtifactCacheMisses uint64
	ArtifactCacheBytes  int64
	DatabaseErrors      uint64
	PointerRefreshes    uint64    // pointers (re)loaded after a NOTIFY
	Reconciles          uint64    // full reconciles
	Pointers            int       // current pointers held in memory
	LastConfirmed       time.Time // last time the pointers were known current
	// ReplicaLag is how far behind its primary the hot standby the store
	// reads is (zero on a primary).
	ReplicaLag time.Duration
	// LeaseEnds is, per environment, the earliest lease end (ExpiresAt)
	// among its servable current pointers (retired, revoked and
	// unservable ones left out): when its first runtime fails closed
	// unless a lease renewal comes first.
	LeaseEnds map[string]time.Time
}

// Delivery is one servable snapshot with everything the response headers
// carry. The byte slices are shared and must not be modified.
type Delivery struct {
	Identity       bundle.Identity
	Audience       string
	SnapshotID     string
	PublicationID  string
	PolicyDigest   string
	ContentDigest  string
	ArtifactDigest string // "sha256:<hex>" of Body
	ReleaseVersion int64

	// Manifest is the exact stored JCS delivery-manifest bytes, with its
	// base64 signature and signing key id. A historical snapshot that was
	// never delivered has none; its manifest headers are then omitted.
	Manifest          []byte
	ManifestSignature string
	ManifestKeyID     string
	// ValidFrom, RefreshAfter and ExpiresAt are the lease exactly as the
	// signed manifest states it (RFC 3339).
	ValidFrom, RefreshAfter, ExpiresAt string

	Body []byte // the exact stored values.yml bytes

	hv *headerValues // set by Prepare
}

// Prepare precomputes the response header values of d. A Store calls it once
// the identifying and manifest fields are set (Body does not matter) and
// before sharing d; d must not change afterwards. An unprepared Delivery is
// served too, computing the values per request.
func (d *Delivery) Prepare() {
	d.hv = d.headerValues(true)
}

// Evidence is a runtime's report of applying or rejecting a snapshot, stored
// as an unverified observation.
type Evidence struct {
	Identity                bundle.Identity
	Audience                string // the token's config_audience
	Outcome                 string // "APPLIED" | "REJECTED"
	Reason                  string // a stable reason code
	SnapshotID              string // the snapshot the report is about; required with APPLIED
	PublicationID           string // optional: that snapshot's publication
	ReleaseVersion          int64  // optional (0)
	Sequence                int64  // optional (0): the delivery-manifest sequence
	RunningSnapshotID       string // optional: the snapshot the runtime runs after the load
	LastKnownGoodSnapshotID string // optional: the runtime's last-known-good
	ArtifactDigest          string
	ContentDigest           string
	PolicyDigest            string
	ObservedAt              time.Time // zero when not reported (the runtime's clock)
	ReportedAt              time.Time // when the server received it (the server's clock); zero = the database's
}
