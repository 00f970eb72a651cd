// Package pgstore implements configserver.Store over the configpub
// PostgreSQL schema, connecting as a member of the
// configpub_server role: it reads current_pointer, config_snapshot,
// delivery_manifest, artifact and revocation, and only inserts into
// runtime_evidence.
//
// New takes the caller's query pool (PoolConfig builds its configuration)
// and does no I/O; Run connects and keeps reconnecting. Current pointers
// are held in memory. A dedicated connection, dialled with a copy of the
// pool's connection config rather than taken from the pool, LISTENs on
// channel configpub_pointer (the promoter NOTIFYs in the transaction that
// moves a pointer or renews a lease) and reloads the moved identity. Every
// write of a current_pointer row records its transaction (change_xid), and
// the store keeps a commit-ordered watermark (the snapshot's xmax and the
// transactions then in progress): a full load runs after every (re)connect
// and after a revocation; otherwise the periodic reconcile, a notification
// that names no single identity, and a server on a hot standby (Options.
// FollowInterval: NOTIFY is not replicated, so it polls instead of
// LISTENing) read only the rows written since the watermark; on a standby
// each round also measures how far it lags its primary (WAL received and
// not replayed, or no WAL receiver), and past Options.MaxReplicaLag its
// pointers count as unconfirmed. The connection is
// probed on a short heartbeat; when the pointers cannot be confirmed current
// within StaleAfter (database down, connection lost) Current answers
// configserver.ErrUnavailable at once, without I/O, and Run reconnects by
// itself. Artifact bytes are immutable and cached by digest under a byte
// bound; bytes read from the database are checked against their digest.
package pgstore
