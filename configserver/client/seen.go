package client

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/configpub/configpub/bundle"
	"github.com/configpub/configpub/internal/atomicfile"
	"github.com/configpub/configpub/internal/signing"
)

// seenFormat opens every seen-state file: "<format> sha256:<hex>\n" followed
// by the JSON payload the digest covers.
const seenFormat = "configpub-seen/1"

// maxSeenFileBytes bounds a seen-state file (a few hundred bytes per key).
const maxSeenFileBytes = 1 << 20

// seenState is the highest delivery-manifest position and revocation epoch
// applied under one signing key.
type seenState struct {
	Sequence        int64     `json:"sequence"`
	IssuedAt        time.Time `json:"issuedAt"`
	ManifestDigest  string    `json:"manifestDigest"`
	RevocationEpoch int64     `json:"revocationEpoch"`
}

// mergeState returns the later of two seen states.
func (s seenState) mergeState(o seenState) seenState {
	if o.RevocationEpoch > s.RevocationEpoch {
		s.RevocationEpoch = o.RevocationEpoch
	}
	if o.Sequence > s.Sequence || (o.Sequence == s.Sequence && o.IssuedAt.After(s.IssuedAt)) {
		s.Sequence, s.IssuedAt, s.ManifestDigest = o.Sequence, o.IssuedAt, o.ManifestDigest
	}
	return s
}

// seenSet is the seen state per signing key id. Only keys that are trusted
// count: dropping a key from the trusted keys (Options.TrustedKeys,
// SetTrustedKeys) discards what it signed, so
// a sequence or epoch pushed far ahead with a leaked key stops blocking the
// legitimate ones once the key is distrusted.
type seenSet map[string]seenState

// floor is the highest position and epoch over every key in s: a candidate
// must not fall below it, whichever trusted key signed it.
func (s seenSet) floor() seenState {
	var f seenState
	for _, st := range s {
		f = f.mergeState(st)
	}
	return f
}

// advance returns a copy of s with keyID's state raised to st.
func (s seenSet) advance(keyID string, st seenState) seenSet {
	out := make(seenSet, len(s)+1)
	for k, v := range s {
		out[k] = v
	}
	out[keyID] = out[keyID].mergeState(st)
	return out
}

// trustedOnly returns the entries of s whose key is in keys.
func (s seenSet) trustedOnly(keys []signing.TrustedKey) seenSet {
	out := make(seenSet, len(s))
	for _, k := range keys {
		if st, ok := s[k.ID]; ok {
			out[k.ID] = st
		}
	}
	return out
}

func (s seenSet) equal(o seenSet) bool {
	if len(s) != len(o) {
		return false
	}
	for k, v := range s {
		w, ok := o[k]
		if !ok || w.Sequence != v.Sequence || !w.IssuedAt.Equal(v.IssuedAt) || w.ManifestDigest != v.ManifestDigest || w.RevocationEpoch != v.RevocationEpoch {
			return false
		}
	}
	return true
}

// stateOf is the seen position of a verified manifest.
func stateOf(m *bundle.DeliveryManifest, issued time.Time, mdigest string) seenState {
	return seenState{Sequence: m.Sequence, IssuedAt: issued, ManifestDigest: mdigest, RevocationEpoch: m.RevocationEpoch}
}

// seenFile is the payload of a seen-state file.
type seenFile struct {
	Identity bundle.Identity `json:"identity"`
	Audience string          `json:"audience"`
	Keys     seenSet         `json:"keys"`
}

// SeenPath returns the seen-state file this client keeps in CacheDir ("" when
// CacheDir is empty): the highest (sequence, issuedAt) and revocation epoch
// applied per signing key, kept apart from the last-known-good so that
// damaging or deleting the last-known-good does not forget them.
func (c *Client) SeenPath() string {
	if c.opts.CacheDir == "" {
		return ""
	}
	return filepath.Join(c.opts.CacheDir, "seen-"+c.fileKey()+".json")
}

// fileKey names this client's files in CacheDir after identity and audience.
func (c *Client) fileKey() string {
	id := c.opts.Identity
	sum := sha256.Sum256([]byte(id.Host + "\x00" + id.ServiceID + "\x00" + id.EnvTag + "\x00" + c.opts.Audience))
	return hex.EncodeToString(sum[:8])
}

// ensureSeen reads the seen-state file once (again after a failure): a
// missing file is an empty state; a damaged or unreadable one is an error
// that refuses every load until it is repaired or removed, since applying
// anything without it would forget what replays to refuse.
func (c *Client) ensureSeen() error {
	if c.seenLoaded || c.opts.CacheDir == "" {
		return nil
	}
	s, err := readSeen(c.SeenPath(), c.opts.Identity, c.opts.Audience)
	if err != nil {
		return err
	}
	c.seen = c.seen.advanceAll(s.trustedOnly(c.trustedKeys()))
	c.seenOnDisk = s
	c.seenLoaded = true
	return nil
}

// advanceAll merges every entry of o into a copy of s.
func (s seenSet) advanceAll(o seenSet) seenSet {
	out := s
	for k, v := range o {
		out = out.advance(k, v)
	}
	if out == nil {
		out = seenSet{}
	}
	return out
}

func readSeen(path string, id bundle.Identity, audience string) (seenSet, error) {
	fail := func(format string, args ...any) error {
		return reject(ReasonSeenStateUnreadable, "seen-state", "%s: "+format, append([]any{path}, args...)...)
	}
	payload, err := readSealed(path, seenFormat, maxSeenFileBytes)
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
		return seenSet{}, nil // nothing seen yet (no such file, or no such directory)
	}
	if err != nil {
		return nil, fail("%v", err)
	}
	dec := json.NewDecoder(bytes.NewReader(payload))
	dec.DisallowUnknownFields()
	var sf seenFile
	if err := dec.Decode(&sf); err != nil {
		return nil, fail("%v", err)
	}
	if sf.Identity != id || sf.Audience != audience {
		return nil, fail("file is for %s (%s), want %s (%s)", sf.Identity, sf.Audience, id, audience)
	}
	if sf.Keys == nil {
		sf.Keys = seenSet{}
	}
	return sf.Keys, nil
}

// writeSeen persists s durably (write, fsync, rename, fsync directory).
func (c *Client) writeSeen(s seenSet) error {
	payload, err := json.Marshal(seenFile{Identity: c.opts.Identity, Audience: c.opts.Audience, Keys: s})
	if err != nil {
		return fmt.Errorf("persist seen-state: %w", err)
	}
	if err := os.MkdirAll(c.opts.CacheDir, 0o700); err != nil {
		return fmt.Errorf("persist seen-state: %w", err)
	}
	if err := atomicfile.Write(c.SeenPath(), seal(seenFormat, payload), 0o600); err != nil {
		return fmt.Errorf("persist seen-state: %w", err)
	}
	return nil
}

// commitSeen makes next the seen state, persisting it first when the client
// has a CacheDir. When it cannot be persisted nothing changes and the error
// is a rejection: a position the client cannot remember must not be applied.
func (c *Client) commitSeen(next seenSet) error {
	next = next.trustedOnly(c.trustedKeys())
	if next.equal(c.seen) {
		return nil
	}
	if c.opts.CacheDir != "" {
		if err := c.writeSeen(next); err != nil {
			return &VerificationError{Reason: ReasonSeenStateUnwritable, Field: "seen-state", Detail: c.SeenPath(), Err: err}
		}
		c.seenOnDisk = next
	}
	c.seen = next
	return nil
}

// commitRenewal is commitSeen for a verified renewal of the snapshot the
// client holds (same snapshot id, artifact digest and sequence). When the
// seen-state file cannot be written (a read-only or full cache volume) and
// the file already holds, for every trusted key, the sequence and
// revocation epoch of next, the write is not needed against replays: a
// client restarted on that file refuses every lower sequence and epoch
// exactly as it would on next, and what it would take in addition are only
// the held snapshot's own earlier renewals, which vouch for the same bytes
// under the same epoch and a lease of their own. The renewal then counts in
// memory (this process still refuses the earlier renewals) and the write
// error is returned as a note (the evidence's cacheError) rather than a
// refusal. A renewal that raises a key's sequence or revocation epoch, or
// is the first under a key, still needs the write (SEEN_STATE_UNWRITABLE).
func (c *Client) commitRenewal(next seenSet) (note string, err error) {
	err = c.commitSeen(next)
	var ve *VerificationError
	if err == nil || !errors.As(err, &ve) || ve.Reason != ReasonSeenStateUnwritable {
		return "", err
	}
	next = next.trustedOnly(c.trustedKeys())
	if !c.seenOnDisk.holdsPositions(next) {
		return "", err
	}
	c.seen = next
	return fmt.Sprintf("seen-state not persisted (%v); not needed for a renewal of the snapshot held: the file already holds its sequence and revocation epoch", ve.Err), nil
}

// holdsPositions reports whether s holds, for every key of next, the same
// sequence and revocation epoch (next may differ only in the issuedAt and
// manifest digest of that sequence).
func (s seenSet) holdsPositions(next seenSet) bool {
	for k, n := range next {
		o, ok := s[k]
		if !ok || o.Sequence != n.Sequence || o.RevocationEpoch != n.RevocationEpoch {
			return false
		}
	}
	return true
}
