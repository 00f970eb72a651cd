package pgstore

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/configpub/configpub/bundle"
)

// watermark is a point in the database's commit order: the xmax and the
// in-progress transaction ids (xid8, as text) of a snapshot. A row written
// by a transaction that was not yet visible in that snapshot has a
// change_xid of at least xmax or one of xip, so "changed since" is an index
// range plus a short list, and nothing committed out of id order is missed.
type watermark struct {
	xmax string
	xip  []string
}

// watermarkQuery reads the watermark of the statement's snapshot. The
// queries that follow it (in the same batch, or later) see at least
// everything it saw, so rows are never skipped, only sometimes re-read.
const watermarkQuery = `SELECT pg_snapshot_xmax(pg_current_snapshot())::text,
	ARRAY(SELECT pg_snapshot_xip(pg_current_snapshot())::text)`

// changedSince is the WHERE condition on a change_xid column c for rows
// that became visible after the watermark ($1 xmax, $2 xip). A row this
// statement sees was written by a transaction below its snapshot's xmax;
// one at or above it was written on another cluster — restored from its
// backup onto one that has run fewer transactions — and is left out: the
// full load of every pointer at connect read it, and without the bound it
// read as changed at every catch-up (every pointer re-read and, for a
// revocation, a full reload every ReconcileInterval) until this cluster's
// transaction ids passed the other's.
func changedSince(c string) string {
	return `((` + c + ` >= $1::text::xid8 OR ` + c + ` = ANY($2::text[]::xid8[])) AND ` +
		c + ` < pg_snapshot_xmax(pg_current_snapshot()))`
}

// revokedSinceQuery reports whether a revocation was recorded since the
// watermark: then every pointer is reloaded.
var revokedSinceQuery = `SELECT EXISTS (SELECT 1 FROM configpub.revocation WHERE ` + changedSince("revoked_xid") + `)`

// changedPointersQuery selects the pointers written since the watermark,
// with whether their snapshot is revoked (such a pointer is dropped from
// memory, as a full reload leaves it out).
var changedPointersQuery = `SELECT p.host, p.service_id, p.env_tag, p.snapshot_id::text,
	s.audience, s.publication_id::text, s.policy_digest, s.content_digest, s.artifact_digest, s.release_version,
	p.manifest, p.manifest_signature, p.manifest_key_id, p.retired_at IS NOT NULL,
	p.retired_at IS NULL AND EXISTS (SELECT 1 FROM configpub.revocation r
		WHERE r.snapshot_id = s.snapshot_id OR r.publication_id = s.publication_id)
FROM configpub.current_pointer p
JOIN configpub.config_snapshot s ON s.snapshot_id = p.snapshot_id
WHERE ` + changedSince("p.change_xid")

// catchUp reloads the pointers written since the last watermark, in chunks
// of maxBatch (each made current and its waiters woken as soon as it is
// loaded: while the rows still stream when its artifacts are cached), and
// advances the watermark. A revocation since the watermark, or
// no watermark yet, makes it a full reconcile.
func (s *Store) catchUp(ctx context.Context, conn *pgx.Conn) error {
	s.mu.RLock()
	wm := s.wm
	s.mu.RUnlock()
	if wm == nil {
		return s.reconcile(ctx, conn)
	}
	qctx, progress, cancel := streamContext(ctx, s.opts.QueryTimeout)
	defer cancel()
	started := time.Now()
	b := &pgx.Batch{}
	b.Queue(watermarkQuery)
	b.Queue(revokedSinceQuery, wm.xmax, wm.xip)
	b.Queue(changedPointersQuery, wm.xmax, wm.xip)
	br := conn.SendBatch(qctx, b)
	var next watermark
	if err := br.QueryRow().Scan(&next.xmax, &next.xip); err != nil {
		br.Close()
		return fmt.Errorf("catch up: read watermark: %w", err)
	}
	var revoked bool
	if err := br.QueryRow().Scan(&revoked); err != nil {
		br.Close()
		return fmt.Errorf("catch up: read revocations: %w", err)
	}
	if revoked {
		if err := br.Close(); err != nil {
			return fmt.Errorf("catch up: %w", err)
		}
		s.opts.Logger.Info("revocation recorded; reconciling every pointer")
		return s.reconcile(ctx, conn)
	}
	rows, err := br.Query()
	if err != nil {
		br.Close()
		return fmt.Errorf("catch up: read changed pointers: %w", err)
	}
	var found []*entry
	var gone []bundle.Identity
	var r rawPointer
	args := r.scanArgs(true)
	for rows.Next() {
		progress()
		if err := rows.Scan(args...); err != nil {
			rows.Close()
			br.Close()
			return fmt.Errorf("catch up: %w", err)
		}
		id := r.identity(&s.strings)
		if r.revoked {
			gone = append(gone, id)
			continue
		}
		if old := s.lookup(id); old != nil && old.same(&r) {
			continue // re-read (a notification already applied it): nothing to wake
		}
		p := r.row(id, &s.strings)
		found = append(found, s.entryFor(&p))
		if len(found) == maxBatch && len(s.uncached(found)) == 0 {
			// Nothing to read for this chunk (a renewal re-signs pointers
			// whose bytes are cached): make it current now, so that a
			// reload of every pointer does not hold two versions of each.
			s.install(found, nil)
			found = found[:0]
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		br.Close()
		return fmt.Errorf("catch up: %w", err)
	}
	if err := br.Close(); err != nil {
		return fmt.Errorf("catch up: %w", err)
	}
	s.prefetchInstall(ctx, conn, found)
	s.install(nil, gone)
	s.mu.Lock()
	s.wm = &next
	s.mu.Unlock()
	s.catchUps.Add(1)
	s.confirmedAt.Store(started.UnixNano())
	return nil
}

// lookup returns id's in-memory entry, or nil.
func (s *Store) lookup(id bundle.Identity) *entry {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.pointers[id]
}

// install makes entries current and removes the identities in gone, then
// wakes the waiters of every identity that changed.
func (s *Store) install(entries []*entry, gone []bundle.Identity) {
	if len(entries) == 0 && len(gone) == 0 {
		return
	}
	changed := make([]bundle.Identity, 0, len(entries)+len(gone))
	s.mu.Lock()
	for _, e := range entries {
		id := e.d.Identity
		old := s.pointers[id]
		if old != nil && old.sameEntry(e) {
			continue
		}
		s.pointers[id] = e
		s.leases.replace(id.EnvTag, old, e)
		changed = append(changed, id)
	}
	for _, id := range gone {
		if old, ok := s.pointers[id]; ok {
			delete(s.pointers, id)
			s.leases.replace(id.EnvTag, old, nil)
			changed = append(changed, id)
		}
	}
	s.mu.Unlock()
	s.changes.Notify(changed...)
	s.refreshes.Add(uint64(len(changed)))
}

// streamContext bounds a streamed read by its progress rather than in
// total: the context ends when d passes without a call to progress (made
// per row or per answer read), so that reading 100,000 rows takes as long
// as it needs while a database that stops answering is still given up on
// after d.
func streamContext(ctx context.Context, d time.Duration) (context.Context, func(), context.CancelFunc) {
	sctx, cancel := context.WithCancel(ctx)
	t := time.AfterFunc(d, cancel)
	return sctx, func() { t.Reset(d) }, func() { t.Stop(); cancel() }
}
