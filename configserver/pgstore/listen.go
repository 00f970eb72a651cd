package pgstore

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime/debug"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/configpub/configpub/bundle"
	"github.com/configpub/configpub/configserver"
	"github.com/configpub/configpub/internal/digest"
	"github.com/configpub/configpub/internal/pointernote"
	"github.com/configpub/configpub/internal/sqlstate"
)

// Run keeps the in-memory pointers current until ctx ends: it connects,
// LISTENs, reconciles, then follows notifications with a heartbeat and a
// periodic reconcile. On any failure it marks the store unavailable and
// reconnects with a capped back-off. It returns nil when ctx ends.
func (s *Store) Run(ctx context.Context) error {
	delay := 50 * time.Millisecond
	failures := 0
	for {
		err := s.follow(ctx, func() { delay, failures = 50*time.Millisecond, 0 })
		s.live.Store(false)
		if ctx.Err() != nil {
			return nil
		}
		why := notLive(err)
		s.down.Store(&why)
		s.dbErrors.Add(1)
		failures++
		if failures == 1 || failures%60 == 0 { // the first failure of an outage, then once a minute or so
			s.opts.Logger.Warn("pointer listener lost the database; retrying", "err", err, "failures", failures)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(delay):
		}
		delay = min(delay*2, s.opts.MaxReconnectDelay)
	}
}

// notLive says, for /readyz (unauthenticated), why a session that ended
// with err left the store without live pointers: connected to a database
// without the configpub schema (the wrong database, or one never
// migrated), or no live connection. It never quotes err, which may name
// the login, the host or the database.
func notLive(err error) string {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && (pgErr.Code == sqlstate.UndefinedTable || pgErr.Code == sqlstate.InvalidSchemaName) {
		return "connected, but the database has no configpub schema (the wrong database, or one never migrated: configpub db migrate)"
	}
	return "no live database connection"
}

// follow runs one LISTEN session; connected is called once it is live.
func (s *Store) follow(ctx context.Context, connected func()) error {
	cc := s.connCfg.Copy()
	if s.beforeConnect != nil {
		if err := s.beforeConnect(ctx, cc); err != nil {
			return fmt.Errorf("connect: %w", err)
		}
	}
	cctx, cancel := context.WithTimeout(ctx, s.opts.ConnectTimeout)
	conn, err := pgx.ConnectConfig(cctx, cc)
	cancel()
	if err != nil {
		return fmt.Errorf("connect: %w", err)
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_ = conn.Close(cctx)
	}()
	var standby bool
	qctx, qcancel := context.WithTimeout(ctx, s.opts.QueryTimeout)
	err = conn.QueryRow(qctx, "SELECT pg_is_in_recovery()").Scan(&standby)
	qcancel()
	if err != nil {
		return fmt.Errorf("pg_is_in_recovery: %w", err)
	}
	if s.opts.FollowInterval > 0 {
		return s.poll(ctx, conn, connected, s.opts.FollowInterval, standby)
	}
	// A hot standby cannot LISTEN (and would receive no notifications):
	// follow it by polling.
	if standby {
		return s.poll(ctx, conn, connected, DefaultFollowInterval, true)
	}
	s.replicaLag.Store(nil)
	if err := s.exec(ctx, conn, "LISTEN "+pointernote.Channel); err != nil {
		return err
	}
	// LISTEN first, then load everything: no move can fall in between.
	if err := s.reconcile(ctx, conn); err != nil {
		return err
	}
	connected()
	s.opts.Logger.Info("pointer listener connected", "pointers", s.Stats().Pointers)
	nextReconcile := time.Now().Add(s.opts.ReconcileInterval)
	for {
		wctx, cancel := context.WithTimeout(ctx, s.opts.Heartbeat)
		n, err := conn.WaitForNotification(wctx)
		cancel()
		switch {
		case ctx.Err() != nil:
			return ctx.Err()
		case err == nil:
			noticed := time.Now()
			payloads, overflow := drain(ctx, conn, n.Payload)
			if overflow {
				err = s.catchUp(ctx, conn) // one read of what changed for a huge burst
			} else {
				err = s.apply(ctx, conn, payloads)
			}
			if err != nil {
				return err
			}
			if s.opts.Visible != nil {
				s.opts.Visible(noticed, len(payloads))
			}
		case pgconn.Timeout(err) || errors.Is(err, context.DeadlineExceeded):
			if time.Now().After(nextReconcile) {
				// The periodic reconcile reads only what changed since the
				// last one (by the watermark), not every pointer.
				if err := s.catchUp(ctx, conn); err != nil {
					return err
				}
				nextReconcile = time.Now().Add(s.opts.ReconcileInterval)
				continue
			}
			// Heartbeat: a round trip proves the connection is alive, and
			// every NOTIFY committed before it has been received.
			if err := s.exec(ctx, conn, "SELECT 1"); err != nil {
				return err
			}
			s.confirm()
		default:
			return fmt.Errorf("wait for notification: %w", err)
		}
	}
}

// DefaultFollowInterval is how often a store reading a hot standby reads
// what changed when Options.FollowInterval is not set.
const DefaultFollowInterval = 200 * time.Millisecond

// poll is follow without LISTEN, for a hot standby (NOTIFY is not
// replicated): load everything, then read what changed since the watermark
// every interval. Each successful round confirms the pointers; on a
// standby, each also measures how far behind its primary the standby is.
func (s *Store) poll(ctx context.Context, conn *pgx.Conn, connected func(), interval time.Duration, standby bool) error {
	// Each measurement comes before the read it vouches for: a standby
	// seen current then has replayed at least what the read returns.
	measure := standby
	observe := func() error {
		err := s.observeStandby(ctx, conn, measure)
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) {
			// The database refuses the measurement itself (a function
			// revoked, a managed service's replica): serve without it
			// rather than not at all, and say so.
			s.opts.Logger.Warn("cannot measure how far the hot standby lags its primary; --max-replica-lag does not apply", "err", err)
			measure = false
			return s.observeStandby(ctx, conn, false)
		}
		return err
	}
	if err := observe(); err != nil {
		return err
	}
	if err := s.reconcile(ctx, conn); err != nil {
		return err
	}
	connected()
	s.opts.Logger.Info("pointer follower connected", "pointers", s.Stats().Pointers, "interval", interval.String())
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
		if err := observe(); err != nil {
			return err
		}
		if err := s.catchUp(ctx, conn); err != nil {
			return err
		}
	}
}

func (s *Store) confirm() { s.confirmedAt.Store(time.Now().UnixNano()) }

func (s *Store) exec(ctx context.Context, conn *pgx.Conn, sql string) error {
	qctx, cancel := context.WithTimeout(ctx, s.opts.QueryTimeout)
	defer cancel()
	if _, err := conn.Exec(qctx, sql); err != nil {
		return fmt.Errorf("%s: %w", sql, err)
	}
	return nil
}

// reconcile reloads every current pointer, streaming the rows, and
// replaces the in-memory set; an unchanged row keeps its entry (no
// re-parse). It records the watermark read just before the rows, and marks
// the store live.
func (s *Store) reconcile(ctx context.Context, conn *pgx.Conn) error {
	qctx, progress, cancel := streamContext(ctx, s.opts.QueryTimeout)
	defer cancel()
	started := time.Now()
	b := &pgx.Batch{}
	b.Queue(watermarkQuery)
	b.Queue(allPointersQuery)
	br := conn.SendBatch(qctx, b)
	defer br.Close()
	var wm watermark
	if err := br.QueryRow().Scan(&wm.xmax, &wm.xip); err != nil {
		return fmt.Errorf("reconcile pointers: read watermark: %w", err)
	}
	rows, err := br.Query()
	if err != nil {
		return fmt.Errorf("reconcile pointers: %w", err)
	}
	s.mu.RLock()
	prev := s.pointers
	s.mu.RUnlock()
	next := make(map[bundle.Identity]*entry, len(prev))
	var fresh []*entry
	var r rawPointer
	args := r.scanArgs(false)
	for rows.Next() {
		progress()
		if err := rows.Scan(args...); err != nil {
			rows.Close()
			return fmt.Errorf("reconcile pointers: %w", err)
		}
		id := r.identity(&s.strings)
		if old := prev[id]; old != nil && old.same(&r) {
			next[old.d.Identity] = old // unchanged since the last load: no copy, no re-parse
			continue
		}
		p := r.row(id, &s.strings)
		e := s.entryFor(&p)
		next[id] = e
		fresh = append(fresh, e)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return fmt.Errorf("reconcile pointers: %w", err)
	}
	if err := br.Close(); err != nil {
		return fmt.Errorf("reconcile pointers: %w", err)
	}
	built := len(fresh)
	for len(fresh) > 0 {
		chunk := fresh[:min(len(fresh), maxBatch)]
		fresh = fresh[len(chunk):]
		s.prefetch(ctx, conn, chunk)
	}
	s.load(next, &wm)
	var changed []bundle.Identity
	for id, e := range next {
		if prev[id] != e {
			changed = append(changed, id)
		}
	}
	for id := range prev {
		if next[id] == nil {
			changed = append(changed, id)
		}
	}
	prev = nil
	if built >= releaseAfter {
		// Go lets the heap grow to about twice what was live at the last
		// collection before it collects again, and keeps what it grew to:
		// a load that built this many entries would leave up to as much
		// again resident (the replaced entries, the decoding scratch).
		// Collect it and hand it back before serving (a collection of the
		// live pointers: some tens of milliseconds per 100,000).
		debug.FreeOSMemory()
	}
	// Confirmed and live before the waiters are woken: a watch woken by
	// the reconcile after a reconnect must read the new pointers, not an
	// unavailable store (503).
	s.confirmedAt.Store(started.UnixNano())
	s.live.Store(true)
	s.down.Store(nil)
	s.changes.Notify(changed...)
	s.reconciles.Add(1)
	return nil
}

// releaseAfter is the number of entries a full reconcile builds from
// which it returns the memory the load used to the operating system
// before the store goes live.
const releaseAfter = 10000

// maxBatch is the most identities reloaded by one query: a large burst (a
// big activation) is reloaded in chunks of maxBatch, each made current and
// its waiters woken as soon as it is loaded, so that answering the first
// ones overlaps loading the rest.
const maxBatch = 512

// maxBurst is the most notifications drain keeps; past it, apply reloads
// everything with one reconcile instead.
const maxBurst = 1 << 17

// drainWait bounds how long drain waits for the next notification of a
// burst; a timeout leaves the connection usable.
const drainWait = time.Millisecond

// burstDrainWait replaces drainWait once a burst is known to be large: a
// process short of CPU can miss a 1 ms gap in the middle of one commit's
// notifications, and the rest would cost a second reload.
const burstDrainWait = 25 * time.Millisecond

// drain returns first plus the notifications that follow it without a
// drainWait gap (a burst from one activation). Past maxBurst it keeps
// reading but only counts, since apply then reconciles everything once.
func drain(ctx context.Context, conn *pgx.Conn, first string) (payloads []string, overflow bool) {
	payloads = []string{first}
	for {
		wait := drainWait
		if len(payloads) >= maxBatch {
			wait = burstDrainWait
		}
		wctx, cancel := context.WithTimeout(ctx, wait)
		n, err := conn.WaitForNotification(wctx)
		cancel()
		if err != nil || n == nil {
			return payloads, overflow
		}
		if len(payloads) < maxBurst {
			payloads = append(payloads, n.Payload)
		} else {
			overflow = true
		}
	}
}

// apply reloads the identities the notifications name, maxBatch per query.
// A payload that names no single identity (a revocation, a batch, one it
// cannot read) makes it read everything that changed since the watermark
// instead.
func (s *Store) apply(ctx context.Context, conn *pgx.Conn, payloads []string) error {
	seen := make(map[bundle.Identity]bool, len(payloads))
	ids := make([]bundle.Identity, 0, len(payloads))
	for _, p := range payloads {
		var n pointernote.Note
		err := json.Unmarshal([]byte(p), &n)
		if err != nil || n.Revoked || n.Host == "" || n.ServiceID == "" || n.EnvTag == "" {
			return s.catchUp(ctx, conn)
		}
		id := bundle.Identity{Host: n.Host, ServiceID: n.ServiceID, EnvTag: n.EnvTag}
		if !seen[id] {
			seen[id] = true
			ids = append(ids, id)
		}
	}
	for len(ids) > 0 {
		chunk := ids[:min(len(ids), maxBatch)]
		ids = ids[len(chunk):]
		if err := s.applyBatch(ctx, conn, chunk); err != nil {
			return err
		}
	}
	return nil
}

// applyBatch reloads ids in one query, makes them current and wakes their
// waiters.
func (s *Store) applyBatch(ctx context.Context, conn *pgx.Conn, ids []bundle.Identity) error {
	hosts, services, envs := make([]string, 0, len(ids)), make([]string, 0, len(ids)), make([]string, 0, len(ids))
	for _, id := range ids {
		hosts, services, envs = append(hosts, id.Host), append(services, id.ServiceID), append(envs, id.EnvTag)
	}
	qctx, cancel := context.WithTimeout(ctx, s.opts.QueryTimeout)
	defer cancel()
	started := time.Now()
	rows, err := conn.Query(qctx, batchPointerQuery, hosts, services, envs)
	if err != nil {
		return fmt.Errorf("refresh %d pointers: %w", len(ids), err)
	}
	found := make(map[bundle.Identity]*entry, len(ids))
	var r rawPointer
	args := r.scanArgs(false)
	for rows.Next() {
		if err := rows.Scan(args...); err != nil {
			rows.Close()
			return fmt.Errorf("refresh %d pointers: %w", len(ids), err)
		}
		id := r.identity(&s.strings)
		p := r.row(id, &s.strings)
		found[id] = s.entryFor(&p)
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("refresh %d pointers: %w", len(ids), err)
	}
	fresh := make([]*entry, 0, len(found))
	for _, e := range found {
		fresh = append(fresh, e)
	}
	s.prefetch(ctx, conn, fresh)
	changed := make([]bundle.Identity, 0, len(ids))
	s.mu.Lock()
	for _, id := range ids {
		old := s.pointers[id]
		if e := found[id]; e != nil {
			if old != nil && old.sameEntry(e) {
				continue // a repeated notification: nothing to wake
			}
			s.pointers[id] = e
			s.leases.replace(id.EnvTag, old, e)
		} else {
			delete(s.pointers, id) // no pointer, or its snapshot is revoked
			s.leases.replace(id.EnvTag, old, nil)
		}
		changed = append(changed, id)
	}
	s.mu.Unlock()
	s.changes.Notify(changed...)
	s.refreshes.Add(uint64(len(ids)))
	s.confirmedAt.Store(started.UnixNano())
	return nil
}

// prefetch loads the artifact bytes of entries into the cache in one
// query, before they become current, so that the held watch requests a
// move wakes are answered from memory. A failure is left to Current, which
// reads (and checks) the bytes itself.
func (s *Store) prefetch(ctx context.Context, conn *pgx.Conn, entries []*entry) {
	want := s.uncached(entries)
	if len(want) == 0 {
		return
	}
	qctx, cancel := context.WithTimeout(ctx, s.opts.QueryTimeout)
	defer cancel()
	rows, err := conn.Query(qctx, artifactsQuery, want)
	if err != nil {
		return
	}
	s.cacheArtifacts(rows, want)
}

// artifactsQuery reads the artifacts whose digests are $1.
const artifactsQuery = `SELECT artifact_digest, bytes FROM configpub.artifact WHERE artifact_digest = ANY($1)`

// uncached returns the artifact digests of entries not in the cache.
func (s *Store) uncached(entries []*entry) []string {
	var want []string
	for _, e := range entries {
		if e.servable() {
			if _, ok := s.artifact.get(e.d.ArtifactDigest); !ok {
				want = append(want, e.d.ArtifactDigest)
			}
		}
	}
	return want
}

// cacheArtifacts puts the rows of the artifactsQuery for want whose bytes
// match their digest into the cache, and closes rows. The cache is keyed
// by the digest strings of want (those the entries hold), not by copies.
func (s *Store) cacheArtifacts(rows pgx.Rows, want []string) {
	defer rows.Close()
	keys := make(map[string]string, len(want))
	for _, k := range want {
		keys[k] = k
	}
	var dgst pgtype.DriverBytes
	for rows.Next() {
		var b []byte
		if rows.Scan(&dgst, &b) != nil {
			return
		}
		key, ok := keys[string(dgst)]
		if ok && digest.FromBytes(b).String() == key {
			s.artifact.put(key, b)
		}
	}
}

// prefetchInstall makes entries current maxBatch at a time, each chunk
// after its artifacts are in the cache, waking its waiters. The artifact
// queries of every chunk go out together (one pipelined round trip), and
// each chunk is installed as soon as its own answer is read, so that a
// burst of thousands costs one round trip and its first waiters are
// answered while the later chunks' bytes still arrive. A failed read
// leaves the bytes to Current, which reads (and checks) them itself. Each
// chunk's read is allowed QueryTimeout (streamContext): a deadline on the
// whole pipeline that ran out mid-read would close the listener's
// connection.
func (s *Store) prefetchInstall(ctx context.Context, conn *pgx.Conn, entries []*entry) {
	var chunks [][]*entry
	b := &pgx.Batch{}
	wants := make([][]string, 0, len(entries)/maxBatch+1) // nil: nothing queued
	for len(entries) > 0 {
		chunk := entries[:min(len(entries), maxBatch)]
		entries = entries[len(chunk):]
		chunks = append(chunks, chunk)
		want := s.uncached(chunk)
		if len(want) > 0 {
			b.Queue(artifactsQuery, want)
		}
		wants = append(wants, want)
	}
	if b.Len() == 0 {
		for _, chunk := range chunks {
			s.install(chunk, nil)
		}
		return
	}
	qctx, progress, cancel := streamContext(ctx, s.opts.QueryTimeout)
	defer cancel()
	br := conn.SendBatch(qctx, b)
	failed := false
	for i, chunk := range chunks {
		if len(wants[i]) > 0 && !failed {
			progress()
			rows, err := br.Query()
			if err != nil {
				failed = true
			} else {
				s.cacheArtifacts(rows, wants[i])
				failed = rows.Err() != nil
			}
		}
		s.install(chunk, nil)
	}
	_ = br.Close()
}

// load makes next the in-memory pointers, reflecting wm, with a lease
// index built for them before the write lock is taken (O(pointers)),
// swapped in under it (O(1)).
func (s *Store) load(next map[bundle.Identity]*entry, wm *watermark) {
	leases := buildLeaseIndex(next)
	s.mu.Lock()
	s.pointers = next
	s.leases = leases
	s.wm = wm
	s.mu.Unlock()
}

// entryFor builds the entry of a copied row.
func (s *Store) entryFor(r *pointerRow) *entry {
	id := r.identity()
	if r.retired {
		return &entry{d: &configserver.Delivery{Identity: id, SnapshotID: r.snapshotID, Manifest: r.manifest}, retired: true}
	}
	d, err := r.delivery(&s.strings, &s.manifests)
	if err != nil {
		s.opts.Logger.Error("current pointer not servable", "identity", id.String(), "err", err)
		return &entry{d: &configserver.Delivery{Identity: id, SnapshotID: r.snapshotID, Manifest: r.manifest}, err: err}
	}
	return &entry{d: d}
}

// sameEntry reports whether o was built from the same row as e.
func (e *entry) sameEntry(o *entry) bool {
	return e.d.SnapshotID == o.d.SnapshotID && e.retired == o.retired && bytes.Equal(e.d.Manifest, o.d.Manifest)
}

// same reports whether r is the row e was built from: the same snapshot
// and byte-identical signed manifest (which names every served field).
func (e *entry) same(r *rawPointer) bool {
	return e.d.SnapshotID == string(r.snapshotID) && e.retired == r.retired && bytes.Equal(e.d.Manifest, r.manifest)
}
