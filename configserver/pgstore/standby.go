package pgstore

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// DefaultMaxReplicaLag is Options.MaxReplicaLag when it is not set: longer
// than the 30 s a standby's replay may wait on a conflicting query by
// default (max_standby_streaming_delay), far shorter than a lease.
const DefaultMaxReplicaLag = time.Minute

// replicationQuery reads, on a hot standby, where WAL has been received and
// replayed up to (bytes from 0/0: NULL without streaming replication since
// the standby started) and whether a WAL receiver is running. Every role
// may call these functions and sees whether pg_stat_wal_receiver has a row
// (only its pid without pg_read_all_stats).
const replicationQuery = `SELECT pg_is_in_recovery(),
	(pg_last_wal_receive_lsn() - '0/0'::pg_lsn)::int8,
	(pg_last_wal_replay_lsn() - '0/0'::pg_lsn)::int8,
	EXISTS (SELECT 1 FROM pg_stat_wal_receiver)`

// replication is one reading of replicationQuery.
type replication struct {
	inRecovery bool
	received   *int64 // nil: no streaming replication since the standby started
	replayed   *int64
	receiver   bool
}

// readReplication reads the standby's replication state.
func (s *Store) readReplication(ctx context.Context, conn *pgx.Conn) (replication, error) {
	qctx, cancel := context.WithTimeout(ctx, s.opts.QueryTimeout)
	defer cancel()
	var r replication
	if err := conn.QueryRow(qctx, replicationQuery).Scan(&r.inRecovery, &r.received, &r.replayed, &r.receiver); err != nil {
		return replication{}, fmt.Errorf("read the standby's replication state: %w", err)
	}
	return r, nil
}

// maxLagSamples bounds lagTracker's samples: a standby that keeps receiving
// WAL it does not replay adds one per follow round.
const maxLagSamples = 1024

// lagTracker measures how far behind its primary a hot standby is, from
// the standby alone, without a clock of the primary's: how long ago the
// oldest WAL the standby has received and not yet replayed arrived (replay
// paused, or held back by a conflicting query), or, when it streams from a
// primary, how long it has had no WAL receiver (the primary unreachable,
// replication refused). A standby fed only by log shipping (no WAL
// received by streaming since it started) is judged by replay alone.
// The zero value is ready; it is used by one goroutine.
type lagTracker struct {
	samples []lagSample // received positions not yet replayed, oldest first
	// noReceiverSince is when the standby, which streams, was first seen
	// without a WAL receiver; zero while it has one.
	noReceiverSince time.Time
}

type lagSample struct {
	at  time.Time
	lsn int64
}

// lag is a standby's delay and what it is.
type lag struct {
	d      time.Duration
	reason string // empty when d is zero
}

func (l lag) String() string {
	if l.d == 0 {
		return "none"
	}
	return fmt.Sprintf("%s for %s", l.reason, l.d.Round(time.Second))
}

// observe records a reading taken at now and returns the standby's lag.
func (t *lagTracker) observe(now time.Time, r replication) lag {
	if !r.inRecovery {
		// Promoted: a primary now, as current as anything can be.
		*t = lagTracker{}
		return lag{}
	}
	if r.received != nil {
		if n := len(t.samples); n == 0 || *r.received > t.samples[n-1].lsn {
			if n == maxLagSamples {
				// Keep the oldest (the lag) and the newest; drop one
				// in between.
				t.samples = append(t.samples[:1], t.samples[2:]...)
			}
			t.samples = append(t.samples, lagSample{at: now, lsn: *r.received})
		}
	}
	if r.replayed != nil {
		i := 0
		for i < len(t.samples) && t.samples[i].lsn <= *r.replayed {
			i++
		}
		t.samples = append(t.samples[:0], t.samples[i:]...)
	}
	var l lag
	if len(t.samples) > 0 {
		l = lag{d: now.Sub(t.samples[0].at), reason: "WAL received and not replayed"}
	}
	switch {
	case r.received == nil || r.receiver:
		t.noReceiverSince = time.Time{}
	case t.noReceiverSince.IsZero():
		t.noReceiverSince = now
	default:
		if d := now.Sub(t.noReceiverSince); d > l.d {
			l = lag{d: d, reason: "no WAL receiver (not streaming from its primary)"}
		}
	}
	return l
}

// tooFarBehind reports whether a standby lagging by l is too far behind to
// serve from.
func (s *Store) tooFarBehind(l lag) bool {
	return s.opts.MaxReplicaLag > 0 && l.d > s.opts.MaxReplicaLag
}

// observeStandby, on a standby, reads its replication state, records its
// lag, and logs when it starts or stops being too far behind. On a primary
// it does nothing.
func (s *Store) observeStandby(ctx context.Context, conn *pgx.Conn, standby bool) error {
	if !standby {
		s.replicaLag.Store(nil)
		return nil
	}
	r, err := s.readReplication(ctx, conn)
	if err != nil {
		return err
	}
	l := s.lagTracker.observe(time.Now(), r)
	prev := s.replicaLag.Swap(&l)
	was := prev != nil && s.tooFarBehind(*prev)
	switch now := s.tooFarBehind(l); {
	case now && !was:
		s.opts.Logger.Warn("hot standby lags its primary; answering 503 until it catches up",
			"lag", l.String(), "max_replica_lag", s.opts.MaxReplicaLag.String())
	case was && !now:
		s.opts.Logger.Info("hot standby caught up with its primary; serving again")
	}
	return nil
}

// lagOf is l's duration, zero for nil.
func lagOf(l *lag) time.Duration {
	if l == nil {
		return 0
	}
	return l.d
}
