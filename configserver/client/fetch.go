package client

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/configpub/configpub/bundle"
	"github.com/configpub/configpub/internal/jcs"
)

// Load fetches the configuration once and applies it only if every check of
// docs/wire-contract.md passes. The first call restores the last-known-good from CacheDir
// (re-verified) before fetching. Load always returns Evidence; its error is
// nil exactly when the outcome is APPLIED or UNCHANGED and a verified,
// unexpired snapshot is current. Otherwise the error matches ErrRejected
// (a *VerificationError) or ErrUnavailable (a *UnavailableError), and also
// ErrExpired or ErrNoSnapshot when the runtime must fail closed.
func (c *Client) Load(ctx context.Context) (*Evidence, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.restoreOnce(ctx)
	now := c.opts.Clock.Now()
	ev := c.newEvidence(SourceServer, now)
	if err := c.ensureSeen(); err != nil {
		return c.finish(ev, err)
	}
	return c.finish(ev, c.fetch(ctx, now, ev))
}

func (c *Client) fetch(ctx context.Context, now time.Time, ev *Evidence) error {
	resp, _, err := c.send(ctx, c.current(), now, 0, true)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	return c.receive(ctx, resp, now, ev)
}

// send issues GET /configs, conditional on cur (the snapshot current when
// the request is built); wait > 0 asks the server to hold the request until
// the identity's pointer changes (wait=). Once cur's refreshAfter has passed
// the request is unconditional when refresh is true, so that the answer
// brings the newest manifest; Watch asks so only about once an interval.
// unconditional reports whether the request went without If-None-Match.
func (c *Client) send(ctx context.Context, cur *Snapshot, now time.Time, wait time.Duration, refresh bool) (resp *http.Response, unconditional bool, err error) {
	if c.opts.ServerURL == "" {
		return nil, false, &UnavailableError{Reason: ReasonUnreachable, Err: errors.New("no server URL configured")}
	}
	u := c.configsURL
	if wait > 0 {
		u += "&wait=" + wait.Round(time.Millisecond).String()
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, false, &UnavailableError{Reason: ReasonUnreachable, Err: err}
	}
	req.Header.Set("Accept", "application/yaml")
	// Ask conditionally while the current lease does not need a refresh:
	// past refreshAfter the full response brings the latest signed
	// manifest even from a server whose 304 does not carry it.
	unconditional = true
	if cur != nil && cur.Manifest != nil && (now.Before(cur.RefreshAfter) || !refresh) {
		req.Header.Set("If-None-Match", `"`+cur.ArtifactDigest+`"`)
		unconditional = false
	}
	if cur != nil && cur.Manifest != nil {
		// A server behind this position (a lagging replica) answers 503
		// rather than an older pointer, which would only be refused.
		req.Header.Set(bundle.HeaderHeldSequence, strconv.FormatInt(cur.Manifest.Sequence, 10))
	}
	if err := c.authorize(ctx, req); err != nil {
		return nil, unconditional, &UnavailableError{Reason: ReasonTokenUnavailable, Err: err}
	}
	resp, err = c.do(req)
	return resp, unconditional, err
}

// receive handles the answer to a GET /configs.
func (c *Client) receive(ctx context.Context, resp *http.Response, now time.Time, ev *Evidence) error {
	switch resp.StatusCode {
	case http.StatusOK:
		return c.fetched(ctx, resp, now, ev)
	case http.StatusNotModified:
		return c.notModified(resp.Header, now, ev)
	}
	err := unavailableStatus(resp)
	if st, ok := refusedStatus(err); ok {
		if cur := c.current(); cur != nil {
			c.answer.note(cur, st) // the pinned sessions on it learn it (Pinned.Snapshot)
		}
	}
	return err
}

// unavailableStatus drains resp and returns the UNAVAILABLE error for its
// status (anything but 200 and 304).
func unavailableStatus(resp *http.Response) *UnavailableError {
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	return statusError(resp.StatusCode)
}

// statusError is the UnavailableError of an answer that carries no
// configuration.
func statusError(status int) *UnavailableError {
	ue := &UnavailableError{Status: status}
	switch {
	case status == http.StatusUnauthorized:
		ue.Reason = ReasonUnauthorized
	case status == http.StatusForbidden:
		ue.Reason = ReasonForbidden
	case status == http.StatusNotFound:
		ue.Reason = ReasonNotFound
	case status == http.StatusGone:
		ue.Reason = ReasonRetired
	case status >= 500:
		ue.Reason = ReasonServerError
	default:
		ue.Reason = ReasonUnexpectedStatus
	}
	return ue
}

func (c *Client) authorize(ctx context.Context, req *http.Request) error {
	if c.opts.TokenSource == nil {
		return nil
	}
	tok, err := c.opts.TokenSource(ctx)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+tok)
	return nil
}

// fetched verifies a 200 response. The signed manifest is verified, and
// checked against the identity, the seen state and the lease, before the body
// is read; the body is read up to MaxBodyBytes and its digest compared with
// every announced digest and the signed one before it is parsed. An
// unauthenticated body is never parsed.
func (c *Client) fetched(ctx context.Context, resp *http.Response, now time.Time, ev *Evidence) error {
	if sid := resp.Header.Get(HeaderSnapshotID); isUUID(sid) {
		ev.SnapshotID = sid // as announced; replaced by the signed value below
	}
	v, err := c.verifyResponse(ctx, resp, now, c.seen.floor(), "", ev)
	if err != nil {
		return c.clockSkew(err, dateOf(resp.Header), now)
	}
	return c.accept(v, SourceServer, now, ev)
}

// verifyResponse verifies a 200 answer (GET /configs, a historical snapshot
// or a candidate) against floor, in the order fetched describes; the signed
// manifest must carry phase ("" for the current configuration).
func (c *Client) verifyResponse(ctx context.Context, resp *http.Response, now time.Time, floor seenState, phase string, ev *Evidence) (*verified, error) {
	h := resp.Header
	mbytes, sig, keyID, err := manifestHeaders(h)
	if err != nil {
		return nil, err
	}
	cand := candidate{manifestBytes: mbytes, signature: sig, keyID: keyID, phase: phase}
	sm, err := c.checkSigned(cand, now, floor, ev)
	if err != nil {
		return nil, err
	}
	if err := checkHeadersAgainstManifest(h, sm.manifest, true); err != nil {
		return nil, err
	}
	body, err := readBody(ctx, resp, c.opts.MaxBodyBytes)
	if err != nil {
		return nil, err
	}
	cand.values = body
	cand.artifactDigest = jcs.BytesDigest(body)
	ev.ArtifactDigest = cand.artifactDigest
	if err := checkDigestHeaders(h, cand.artifactDigest, true); err != nil {
		return nil, err
	}
	return c.checkBody(cand, sm, now, ev)
}

// notModified handles a 304: the current snapshot stays; a renewed manifest
// carried in the 304's headers is verified against the current bytes.
func (c *Client) notModified(h http.Header, now time.Time, ev *Evidence) error {
	cur := c.current()
	if cur == nil || cur.Manifest == nil {
		return reject(ReasonUnexpectedNotModified, "status", "304 without a conditional request")
	}
	if et := h.Get(HeaderETag); et != "" {
		d, err := parseETag(et)
		if err != nil {
			return err
		}
		if d != cur.ArtifactDigest {
			return reject(ReasonUnexpectedNotModified, HeaderETag, "304 for %s, current is %s", d, cur.ArtifactDigest)
		}
	}
	if h.Get(HeaderManifest) != "" {
		mbytes, sig, keyID, err := manifestHeaders(h)
		if err != nil {
			return err
		}
		if !bytes.Equal(mbytes, cur.ManifestBytes) {
			if err := checkDigestHeaders(h, cur.ArtifactDigest, false); err != nil {
				return err
			}
			v, err := c.verifyCandidate(candidate{values: cur.Values, artifactDigest: cur.ArtifactDigest, manifestBytes: mbytes, signature: sig, keyID: keyID}, now, c.seen.floor(), ev)
			if err != nil {
				return c.clockSkew(err, dateOf(h), now)
			}
			if err := checkHeadersAgainstManifest(h, v.manifest, false); err != nil {
				return err
			}
			return c.accept(v, SourceServer, now, ev)
		}
	}
	ev.fromSnapshot(cur)
	ev.Outcome, ev.Reason = OutcomeUnchanged, ReasonNotModified
	return nil
}

// clockSkew names the runtime's clock when a served manifest's lease is
// refused by it and the server's clock, date (the answer's Date header, to
// the second; zero when there was none), says that the lease holds:
//
//   - behind: refused as not yet valid, date is ahead of now by more than
//     the skew, and by date the lease has begun. A runtime whose clock is
//     behind by more than the skew plus the renewal interval refuses every
//     renewal (each starts its lease at its issue time) and every pointer
//     move alike, rollbacks included, until its lease ends and it fails
//     closed;
//   - ahead: refused as expired, now is ahead of date by more than the skew
//     (and the second Date drops), and by date the lease has not ended. A
//     runtime whose clock is ahead by more than the skew plus the lease's
//     remainder finds every lease ended: its own fails closed early and
//     every renewal is refused.
//
// A lease that does not hold by the server's clock either (a signer's clock
// that is off, renewals that stopped) stays NOT_YET_VALID or EXPIRED:
// setting this runtime's clock right would not help. NOT_YET_VALID or
// EXPIRED alone does not say that it is this clock that is wrong. Date is
// not signed: it only chooses the reason, the manifest is refused either
// way.
func (c *Client) clockSkew(err error, date, now time.Time) error {
	return c.clockSkewBy(err, "the server's", date, now)
}

// clockSkewBy is clockSkew with whose clock date is ("the server's", "the
// registry's").
func (c *Client) clockSkewBy(err error, whose string, date, now time.Time) error {
	var ve *VerificationError
	if date.IsZero() || !errors.As(err, &ve) {
		return err
	}
	skew := c.opts.Skew
	switch {
	case ve.Reason == ReasonNotYetValid && ve.Field == "manifest.validFrom" && !ve.validFrom.IsZero():
		behind := date.Sub(now).Truncate(time.Second)
		if behind <= skew || date.Add(time.Second).Before(ve.validFrom.Add(-skew)) {
			return err
		}
		return &VerificationError{Reason: ReasonClockSkew, Field: "Date",
			Detail: fmt.Sprintf("this runtime's clock is %s behind %s (Date %s, now %s), more than the skew %s: synchronize it (NTP); %s",
				behind, whose, date.UTC().Format(time.RFC3339), now.UTC().Format(time.RFC3339), skew, ve.Detail)}
	case ve.Reason == ReasonExpired && ve.Field == "manifest.expiresAt" && !ve.expiresAt.IsZero():
		ahead := now.Sub(date).Truncate(time.Second)
		if now.Sub(date.Add(time.Second)) <= skew || !date.Before(ve.expiresAt.Add(skew)) {
			return err
		}
		return &VerificationError{Reason: ReasonClockSkew, Field: "Date",
			Detail: fmt.Sprintf("this runtime's clock is %s ahead of %s (Date %s, now %s), more than the skew %s: synchronize it (NTP); %s",
				ahead, whose, date.UTC().Format(time.RFC3339), now.UTC().Format(time.RFC3339), skew, ve.Detail)}
	}
	return err
}

// dateOf is an answer's Date header; zero when it has none or it does not
// parse.
func dateOf(h http.Header) time.Time {
	t, err := http.ParseTime(h.Get("Date"))
	if err != nil {
		return time.Time{}
	}
	return t
}

// readBody reads at most max bytes; a longer body is BODY_TOO_LARGE, a body
// shorter than announced or cut off is TRUNCATED.
func readBody(ctx context.Context, resp *http.Response, max int64) ([]byte, error) {
	if resp.ContentLength > max {
		return nil, reject(ReasonBodyTooLarge, "body", "Content-Length %d exceeds the limit of %d bytes", resp.ContentLength, max)
	}
	var buf bytes.Buffer
	if resp.ContentLength > 0 {
		buf.Grow(int(resp.ContentLength))
	}
	n, err := buf.ReadFrom(io.LimitReader(resp.Body, max+1))
	if err != nil {
		if ctx.Err() != nil {
			return nil, &UnavailableError{Reason: ReasonUnreachable, Err: ctx.Err()}
		}
		return nil, &VerificationError{Reason: ReasonTruncated, Field: "body", Detail: fmt.Sprintf("read %d of %d announced bytes", n, resp.ContentLength), Err: err}
	}
	if n > max {
		return nil, reject(ReasonBodyTooLarge, "body", "body exceeds the limit of %d bytes", max)
	}
	if resp.ContentLength >= 0 && n != resp.ContentLength {
		return nil, reject(ReasonTruncated, "body", "read %d of %d announced bytes", n, resp.ContentLength)
	}
	return buf.Bytes(), nil
}

// accept makes a verified candidate current (unless it is exactly the
// current one): the seen state is persisted first (when it cannot be, nothing
// is applied), then the snapshot is swapped in and persisted as
// last-known-good.
func (c *Client) accept(v *verified, src Source, now time.Time, ev *Evidence) error {
	cur := c.current()
	ev.fromSnapshot(v.snap)
	if v.sameAs(cur) {
		ev.Outcome, ev.Reason = OutcomeUnchanged, ReasonNotModified
		return nil
	}
	next := c.seen.advance(v.keyID, stateOf(v.manifest, v.issuedAt, jcs.BytesDigest(v.snap.ManifestBytes)))
	// A renewal of the snapshot held: the current one or, when none is
	// current, the last-known-good on disk whose lease ran out (a runtime
	// restarted on a read-only cache the renewals could not update).
	at := position{snapshotID: v.snap.SnapshotID, artifactDigest: v.snap.ArtifactDigest, sequence: v.manifest.Sequence}
	renewal := cur != nil && cur.Manifest != nil && at == (position{cur.SnapshotID, cur.ArtifactDigest, cur.Manifest.Sequence}) ||
		cur == nil && c.heldOnDisk != nil && at == *c.heldOnDisk
	var notes []string
	if renewal {
		note, err := c.commitRenewal(next)
		if err != nil {
			return err
		}
		if note != "" {
			notes = append(notes, note)
		}
	} else if err := c.commitSeen(next); err != nil {
		return err
	}
	ev.Outcome, ev.Reason = OutcomeApplied, ReasonNewSnapshot
	if renewal {
		ev.Reason = ReasonLeaseRenewed
	}
	v.snap.Source = src
	c.publish(v.snap, now)
	c.answer.note(v.snap, 0)
	if c.opts.CacheDir != "" {
		if err := c.persist(v.snap); err != nil {
			ev.CacheError = strings.Join(append(notes, err.Error()), "; ")
			return nil
		}
	}
	if len(notes) > 0 {
		ev.CacheError = strings.Join(notes, "; ")
	}
	c.lkgSnapshotID = v.snap.SnapshotID // without a CacheDir it is kept in memory only
	return nil
}

// position names a pointer move's snapshot: a lease renewal keeps all three.
type position struct {
	snapshotID, artifactDigest string
	sequence                   int64
}

// do sends req with the client's HTTP client, which follows no redirect: a
// redirect is UNAVAILABLE with REDIRECT_REFUSED (the bearer token never
// travels to another location).
func (c *Client) do(req *http.Request) (*http.Response, error) {
	resp, err := c.opts.HTTPClient.Do(req)
	if errors.Is(err, errRedirect) {
		return nil, &UnavailableError{Reason: ReasonRedirectRefused, Err: err}
	}
	if err != nil {
		return nil, &UnavailableError{Reason: ReasonUnreachable, Err: err}
	}
	return resp, nil
}

// finish records err in ev, notes what is current afterwards and builds the
// error Load returns.
func (c *Client) finish(ev *Evidence, err error) (*Evidence, error) {
	if err != nil {
		ev.fail(err)
	}
	snap, gerr := c.Current()
	if gerr == nil {
		ev.CurrentSnapshotID = snap.SnapshotID
	} else {
		ev.FailedClosed = true
	}
	ev.LastKnownGoodSnapshotID = c.lkgSnapshotID
	c.st.record(ev, c.current(), c.lkgSnapshotID)
	log := c.opts.Logger
	level := slog.LevelInfo
	switch {
	case ev.FailedClosed || ev.CacheError != "":
		level = slog.LevelError
	case err != nil:
		level = slog.LevelWarn
	}
	if !log.Enabled(context.Background(), level) {
		return loadResult(ev, err, gerr)
	}
	attrs := []any{"outcome", ev.Outcome, "reason", ev.Reason, "source", ev.Source, "identity", c.opts.Identity.String(),
		"snapshotId", ev.SnapshotID, "artifactDigest", ev.ArtifactDigest, "currentSnapshotId", ev.CurrentSnapshotID, "failedClosed", ev.FailedClosed}
	switch {
	case ev.FailedClosed:
		log.Error("config load: failing closed", append(attrs, "field", ev.Field, "detail", ev.Detail)...)
	case err != nil:
		log.Warn("config load: kept current", append(attrs, "field", ev.Field, "detail", ev.Detail)...)
	default:
		log.Info("config load", attrs...)
	}
	if ev.CacheError != "" {
		log.Error("config load: last-known-good not persisted", "error", ev.CacheError)
	}
	return loadResult(ev, err, gerr)
}

// loadResult builds the error a load returns: the load's own error and, when
// the runtime must fail closed, the guard's.
func loadResult(ev *Evidence, err, gerr error) (*Evidence, error) {
	switch {
	case err != nil && gerr != nil:
		return ev, fmt.Errorf("%w; %w", err, gerr)
	case err != nil:
		return ev, err
	default:
		return ev, gerr
	}
}
