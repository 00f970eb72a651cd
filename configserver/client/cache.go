package client

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/configpub/configpub/bundle"
	"github.com/configpub/configpub/internal/atomicfile"
	"github.com/configpub/configpub/internal/jcs"
)

// lkgFormat opens every last-known-good file: "<format> sha256:<hex>\n"
// followed by the JSON payload the digest covers. A damaged or truncated
// file fails the digest before anything in it is trusted.
const lkgFormat = "configpub-lkg/1"

// lkgFile is the payload of a last-known-good file: the exact values.yml
// bytes, the signed manifest that vouches for them, and the seen state.
type lkgFile struct {
	Identity       bundle.Identity `json:"identity"`
	Audience       string          `json:"audience"`
	ArtifactDigest string          `json:"artifactDigest"`
	Values         []byte          `json:"values"`
	Manifest       []byte          `json:"manifest"`
	Signature      string          `json:"signature"`
	KeyID          string          `json:"keyId"`
	// Seen is read from files written before the seen-state had a file of
	// its own (it then counts for KeyID); it is no longer written.
	Seen *seenState `json:"seen,omitempty"`
}

// CachePath returns the last-known-good file this client uses in CacheDir
// ("" when CacheDir is empty). The name is derived from the identity and
// audience, so several clients can share a directory.
func (c *Client) CachePath() string {
	if c.opts.CacheDir == "" {
		return ""
	}
	return filepath.Join(c.opts.CacheDir, "lkg-"+c.fileKey()+".json")
}

// persist writes s durably as the last-known-good.
func (c *Client) persist(s *Snapshot) error {
	if s.Manifest == nil {
		return nil // OCI-sourced: no delivery manifest to re-verify later
	}
	payload, err := json.Marshal(lkgFile{
		Identity: c.opts.Identity, Audience: c.opts.Audience, ArtifactDigest: s.ArtifactDigest,
		Values: s.Values, Manifest: s.ManifestBytes, Signature: s.Signature, KeyID: s.KeyID,
	})
	if err != nil {
		return fmt.Errorf("persist last-known-good: %w", err)
	}
	if err := os.MkdirAll(c.opts.CacheDir, 0o700); err != nil {
		return fmt.Errorf("persist last-known-good: %w", err)
	}
	if err := atomicfile.WriteWithHook(c.CachePath(), seal(lkgFormat, payload), 0o600, c.faults.beforeRename); err != nil {
		return fmt.Errorf("persist last-known-good: %w", err)
	}
	return nil
}

// WriteFile writes data to path atomically and durably: a temporary file in
// the same directory is written, fsynced and renamed over path, then the
// directory is fsynced. Readers see the old or the new content, never a mix;
// a crash leaves at most a stray ".<name>.*.tmp" file.
func WriteFile(path string, data []byte, perm fs.FileMode) error {
	return atomicfile.Write(path, data, perm)
}

// Restore re-verifies the last-known-good file in CacheDir (digest,
// signature, identity, lease, exactly as a fresh response) and makes it
// current when it passes and nothing newer is current. A damaged file is
// REJECTED with CACHE_CORRUPT (or the failed check's reason) and never used.
// The file is not held against the seen state (a crash between persisting
// the seen state and the last-known-good may leave it one position behind);
// the seen state never moves back because of it. Load calls Restore once by
// itself.
func (c *Client) Restore(ctx context.Context) (*Evidence, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.restored = true
	now := c.opts.Clock.Now()
	ev := c.newEvidence(SourceCache, now)
	return c.finish(ev, c.restore(ctx, now, ev))
}

func (c *Client) restoreOnce(ctx context.Context) {
	if c.restored {
		return
	}
	c.restored = true
	if c.opts.CacheDir == "" {
		return
	}
	now := c.opts.Clock.Now()
	ev := c.newEvidence(SourceCache, now)
	// Not cancelled with ctx: reading the local file is quick, and a load
	// interrupted as it starts is no reason to fail closed.
	_, _ = c.finish(ev, c.restore(context.WithoutCancel(ctx), now, ev)) // logged by finish
}

func (c *Client) restore(ctx context.Context, now time.Time, ev *Evidence) error {
	if err := ctx.Err(); err != nil {
		return &UnavailableError{Reason: ReasonNoCache, Err: err}
	}
	path := c.CachePath()
	if path == "" {
		return &UnavailableError{Reason: ReasonNoCache, Err: errors.New("no cache directory configured")}
	}
	c.removeStaleTemps(c.SeenPath())
	if err := c.ensureSeen(); err != nil {
		return err
	}
	c.removeStaleTemps(path)
	lkg, err := readLKG(path, 2*c.opts.MaxBodyBytes+(64<<10))
	if err != nil {
		return err
	}
	if lkg.Identity != c.opts.Identity || lkg.Audience != c.opts.Audience {
		return reject(ReasonIdentityMismatch, "cache", "file is for %s (%s), want %s (%s)", lkg.Identity, lkg.Audience, c.opts.Identity, c.opts.Audience)
	}
	digest := jcs.BytesDigest(lkg.Values)
	if digest != lkg.ArtifactDigest {
		return reject(ReasonDigestMismatch, "cache", "stored %s != recomputed %s", lkg.ArtifactDigest, digest)
	}
	v, err := c.verifyCandidate(candidate{values: lkg.Values, artifactDigest: digest, manifestBytes: lkg.Manifest, signature: lkg.Signature, keyID: lkg.KeyID}, now, seenState{}, ev)
	next := c.seen
	if lkg.Seen != nil && (err == nil || isLeaseReason(err)) {
		// A file from before the seen-state had its own file: what it had
		// seen still guards against replays, even when its lease has run out.
		next = next.advance(lkg.KeyID, *lkg.Seen)
	}
	if err != nil {
		if cerr := c.commitSeen(next); cerr != nil {
			return cerr
		}
		if m, perr := bundle.ParseDeliveryManifest(lkg.Manifest); perr == nil && isLeaseReason(err) && m.ArtifactDigest == digest {
			// Signed by a trusted key for these bytes, only its lease is
			// over: the snapshot this runtime holds on disk, which a
			// renewal of it may bring back without a seen-state write.
			c.heldOnDisk = &position{snapshotID: m.SnapshotID, artifactDigest: digest, sequence: m.Sequence}
		}
		return err
	}
	if err := c.commitSeen(next.advance(v.keyID, stateOf(v.manifest, v.issuedAt, jcs.BytesDigest(lkg.Manifest)))); err != nil {
		return err
	}
	ev.fromSnapshot(v.snap)
	if cur := c.current(); cur != nil {
		ev.Outcome, ev.Reason = OutcomeUnchanged, ReasonNotModified
		return nil
	}
	v.snap.Source = SourceCache
	c.publish(v.snap, now)
	c.lkgSnapshotID = v.snap.SnapshotID
	ev.Outcome, ev.Reason = OutcomeApplied, ReasonRestored
	return nil
}

// isLeaseReason reports whether err is a rejection for the lease alone.
func isLeaseReason(err error) bool {
	r, _ := reasonOf(err)
	return r == ReasonExpired || r == ReasonNotYetValid
}

// removeStaleTemps deletes temporary files a crash left behind.
func (c *Client) removeStaleTemps(path string) {
	_, _ = atomicfile.RemoveStale(path)
}

func readLKG(path string, max int64) (*lkgFile, error) {
	payload, err := readSealed(path, lkgFormat, max)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, &UnavailableError{Reason: ReasonNoCache, Err: err}
	}
	if err != nil {
		return nil, &VerificationError{Reason: ReasonCacheCorrupt, Field: "cache", Err: err}
	}
	dec := json.NewDecoder(bytes.NewReader(payload))
	dec.DisallowUnknownFields()
	var lkg lkgFile
	if err := dec.Decode(&lkg); err != nil {
		return nil, &VerificationError{Reason: ReasonCacheCorrupt, Field: "cache", Err: err}
	}
	return &lkg, nil
}

// seal returns a file body "<format> sha256:<hex>\n" + payload: a damaged or
// truncated file fails the digest before anything in it is trusted.
func seal(format string, payload []byte) []byte {
	sum := sha256.Sum256(payload)
	var buf bytes.Buffer
	buf.Grow(len(payload) + len(format) + 80)
	buf.WriteString(format + " sha256:" + hex.EncodeToString(sum[:]) + "\n")
	buf.Write(payload)
	return buf.Bytes()
}

// readSealed reads at most max bytes of a file written with seal and
// returns its payload once the format and digest check out. A missing file
// is an error matching fs.ErrNotExist.
func readSealed(path, format string, max int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > max {
		return nil, fmt.Errorf("file exceeds %d bytes", max)
	}
	head, payload, ok := bytes.Cut(b, []byte("\n"))
	if !ok {
		return nil, errors.New("no header line (damaged or truncated)")
	}
	got, want, _ := strings.Cut(string(head), " ")
	if got != format {
		return nil, fmt.Errorf("format %q, want %q", got, format)
	}
	if d := jcs.BytesDigest(payload); d != want {
		return nil, fmt.Errorf("payload %s != header %s (damaged or truncated)", d, want)
	}
	return payload, nil
}
