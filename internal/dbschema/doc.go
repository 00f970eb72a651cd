// Package dbschema holds configpub's PostgreSQL schema as
// versioned SQL migrations embedded in the binary, and Migrate, which applies
// the ones a database does not have yet.
//
// Migrate records every applied migration in the ledger table
// configpub.schema_migration (version, name, SHA-256 of the SQL text); running
// it again is a no-op, and a migration whose text changed after it was applied
// is refused (ErrChecksumMismatch). Each migration runs in its own transaction
// under a transaction-scoped advisory lock, so concurrent migrators of one
// database serialize, and the cluster-wide group roles are created with a
// guard against duplicate_object, so many databases of one cluster can migrate
// concurrently.
//
// The schema `configpub`:
//
//   - artifact, config_snapshot, config_release_target, pointer_move,
//     delivery_manifest, revocation, config_release_journal and
//     runtime_evidence are append-only: triggers refuse UPDATE, DELETE and
//     TRUNCATE for every role, the owner included (SQLSTATE
//     AppendOnlySQLState), except that configpub.collect_artifacts deletes
//     artifacts no snapshot references, configpub.collect_renewals delivery
//     manifests of lease renewals a later manifest of the same pointer move
//     supersedes, configpub.collect_observations APPLIED observations a
//     later observation of the same identity supersedes, and
//     configpub.collect_receipts APPLIED receipts that repeat a state within
//     a pointer move's span.
//   - config_release carries row_revision (compare-and-swap); a trigger only
//     lets it grow by exactly one per update, keeps the definition and its
//     provenance immutable, and a journal row's sequence must equal the
//     revision it records.
//   - current_pointer, environment and command are the mutable state.
//   - runtime_evidence is where runtimes' APPLIED/REJECTED reports land.
//
// Group roles (NOLOGIN, never superuser): configpub_promoter (reads and
// writes, never deletes), configpub_server (SELECT on artifact,
// config_snapshot, current_pointer, delivery_manifest and revocation; INSERT
// into runtime_evidence only) and configpub_workflow_reader (SELECT on release
// metadata, snapshots' metadata, pointers and their history; no artifact
// bytes).
package dbschema
