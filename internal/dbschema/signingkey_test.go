package dbschema_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/configpub/configpub/internal/dbschema"
	"github.com/configpub/configpub/internal/pgtest"
	"github.com/configpub/configpub/internal/signing"
	"github.com/configpub/configpub/internal/sqlstate"
)

// TestSigningKeyMigrationOnAnUpgradedDatabase: a database at migration 28
// with signed rows (the seed's pointer and delivery manifest) migrates to
// 29, keeping them, and gets an empty configpub.signing_key. The promoter
// records a key and moves its last use; it cannot change a recorded key,
// delete one, or record a key under another key's id (the key id is the
// SHA-256 of the PKIX DER, checked by the table); the owner cannot change
// or delete one either (trigger); the Config Server reads nothing of it.
func TestSigningKeyMigrationOnAnUpgradedDatabase(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := pgtest.NewAt(t, 28)
	owner := db.Pool(t)
	if _, err := owner.Exec(ctx, seed); err != nil {
		t.Fatalf("seed at migration 28: %v", err)
	}
	var absent bool
	if err := owner.QueryRow(ctx, `SELECT to_regclass('configpub.signing_key') IS NULL`).Scan(&absent); err != nil || !absent {
		t.Fatalf("signing_key at migration 28: absent %v, %v; want absent", absent, err)
	}
	conn, err := pgx.Connect(ctx, db.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if n, err := dbschema.MigrateTo(ctx, conn, 29); err != nil || n != 1 {
		t.Fatalf("migrate from 28: applied %d, %v; want migration 29 alone", n, err)
	}
	var manifests, keys int
	if err := owner.QueryRow(ctx, `SELECT (SELECT count(*) FROM configpub.delivery_manifest), (SELECT count(*) FROM configpub.signing_key)`).
		Scan(&manifests, &keys); err != nil {
		t.Fatal(err)
	}
	if manifests != 1 || keys != 0 {
		t.Fatalf("after the upgrade: %d delivery manifests and %d signing keys, want the seeded 1 and none", manifests, keys)
	}

	key := func() (string, []byte) {
		t.Helper()
		k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		der, err := x509.MarshalPKIXPublicKey(&k.PublicKey)
		if err != nil {
			t.Fatal(err)
		}
		id, err := signing.KeyID(&k.PublicKey)
		if err != nil {
			t.Fatal(err)
		}
		return id, der
	}
	id, der := key()
	otherID, _ := key()
	promoter := db.PoolURL(t, db.URLFor(t, "configpub_promoter"))
	server := db.PoolURL(t, db.URLFor(t, "configpub_server"))
	const insert = `INSERT INTO configpub.signing_key (key_id, public_key, algorithm, first_used_at, last_used_at)
		VALUES ($1, $2, 'ecdsa-p256-sha256', '2026-08-14T00:00:00Z', '2026-08-14T00:00:00Z')`
	if _, err := promoter.Exec(ctx, insert, otherID, der); sqlState(err) != sqlstate.CheckViolation {
		t.Fatalf("promoter recording a public key under another key's id: got %v, want SQLSTATE %s", err, sqlstate.CheckViolation)
	}
	if _, err := promoter.Exec(ctx, insert, id, der); err != nil {
		t.Fatalf("promoter recording a key: %v", err)
	}
	if _, err := promoter.Exec(ctx, `UPDATE configpub.signing_key SET last_used_at = '2026-08-15T00:00:00Z' WHERE key_id = $1`, id); err != nil {
		t.Fatalf("promoter moving a key's last use: %v", err)
	}
	_, otherDER := key()
	for _, tc := range []struct {
		name, stmt string
		args       []any
		want       string
	}{
		{"promoter replacing the public key", `UPDATE configpub.signing_key SET public_key = $1`, []any{otherDER}, sqlstate.InsufficientPrivilege},
		{"promoter moving the first use", `UPDATE configpub.signing_key SET first_used_at = now()`, nil, sqlstate.InsufficientPrivilege},
		{"promoter deleting a key", `DELETE FROM configpub.signing_key`, nil, sqlstate.InsufficientPrivilege},
		{"server reading the keys", `SELECT * FROM configpub.signing_key`, nil, sqlstate.InsufficientPrivilege},
		{"owner replacing the public key", `UPDATE configpub.signing_key SET public_key = $1`, []any{otherDER}, dbschema.AppendOnlySQLState},
		{"owner moving the first use", `UPDATE configpub.signing_key SET first_used_at = '2026-08-13T00:00:00Z'`, nil, dbschema.AppendOnlySQLState},
		{"owner deleting a key", `DELETE FROM configpub.signing_key`, nil, dbschema.AppendOnlySQLState},
		{"owner truncating", `TRUNCATE configpub.signing_key`, nil, dbschema.AppendOnlySQLState},
	} {
		pool := owner
		switch tc.name[:5] {
		case "promo":
			pool = promoter
		case "serve":
			pool = server
		}
		if _, err := pool.Exec(ctx, tc.stmt, tc.args...); sqlState(err) != tc.want {
			t.Errorf("%s: got %v, want SQLSTATE %s", tc.name, err, tc.want)
		}
	}
	var gotDER []byte
	var first, last time.Time
	if err := owner.QueryRow(ctx, `SELECT public_key, first_used_at, last_used_at FROM configpub.signing_key WHERE key_id = $1`, id).
		Scan(&gotDER, &first, &last); err != nil {
		t.Fatal(err)
	}
	if string(gotDER) != string(der) || !first.Equal(time.Date(2026, 8, 14, 0, 0, 0, 0, time.UTC)) || !last.Equal(time.Date(2026, 8, 15, 0, 0, 0, 0, time.UTC)) {
		t.Fatalf("recorded key: first %s, last %s, same DER %v; want first 2026-08-14, last 2026-08-15, the recorded DER", first, last, string(gotDER) == string(der))
	}
}
