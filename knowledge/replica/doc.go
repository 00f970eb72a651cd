// Package replica materializes a Knowledge runtime's control replicas into
// the service's own PostgreSQL database.
//
// A Knowledge snapshot (audience knowledge) carries, in its
// knowledgePolicy namespace, the knowledge bases, retrieval profiles,
// index generations and Agent bindings of its host, and a complete replica
// inventory: every replica's kind, id and digest, the tombstones (replicas
// of the previous release that are gone) and a digest over both. After the
// runtime client (configserver/client) has verified and applied a snapshot,
// the service's snapshot loader calls Store.Apply with it:
//
//	snap, err := c.Current()
//	...
//	res, err := replica.New(loaderPool, replica.Options{}).Apply(ctx, snap)
//
// Apply first stages the whole set (Stage): contentDigest recomputed over
// the namespace, the inventory digest over items and tombstones, every
// replica's digest over its RFC 8785 content, and the inventory must list
// exactly the replicas the snapshot carries. Then, in one transaction under
// a per-identity lock, it compares the snapshot with the applied pointer
// and refuses a regression (ErrRegression): a lower delivery-manifest
// sequence (a replay), another snapshot at the applied sequence, a lower
// revocation epoch, and — unless Options.AllowRollback — a lower release
// version, source event watermark or policy version. It then inserts new
// replicas, updates changed ones, deletes the tombstoned ones and every
// other materialized replica the complete inventory does not list (those
// of a release the service skipped, or one a rollback leaves; ErrUnlisted
// instead with Options.KeepUnlisted), leaves unchanged rows untouched and
// moves the applied pointer, so that the materialized set is exactly the
// snapshot's inventory. A refusal or a failure at any point (a crash, a
// kill -9, a lost connection) leaves the previous replica set and its
// pointer: PostgreSQL rolls the transaction back; an incomplete or
// unverified inventory deletes nothing. Re-applying the applied snapshot
// writes nothing; a lease renewal of it writes only the pointer's lease.
// Apply creates no jobs and calls nothing outside its transaction.
//
// Schema and roles: Migrate (run by the service database's owner) creates
// schema configpub_knowledge with applied_snapshot (one row per runtime
// identity) and replica (identity, kind, id, digest, content jsonb, the
// release and snapshot that wrote it), and two NOLOGIN group roles:
// LoaderRole, the only writer (SELECT, INSERT, UPDATE on applied_snapshot;
// SELECT, INSERT, UPDATE, DELETE on replica), and ReaderRole (SELECT on
// both, and the view live_replica: the replicas whose applied snapshot's
// signed lease, applied_snapshot.lease_expires_at, has not ended) for the
// service's API and job roles. Neither can create objects in these schemas
// or reach any other schema. A lease renewal of the applied snapshot (a
// later issuedAt) records its lease_expires_at, a shortened one included,
// without rewriting a replica, so readers of
// live_replica fail closed when the runtime client does.
package replica
