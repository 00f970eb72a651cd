package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/configpub/configpub/internal/atomicfile"
	"github.com/configpub/configpub/internal/pgtest"
)

// TestLeaseRenewRidesOutADatabaseFailure: a long-running `lease renew
// --interval` whose database connection is cut mid-renewal (as a restart or
// a failover cuts it) reports the failure and renews again, instead of
// exiting and leaving every lease to run out. The fault is real: the
// renewal is made to wait on the environment's row lock, and its backend is
// terminated there.
func TestLeaseRenewRidesOutADatabaseFailure(t *testing.T) {
	db := pgtest.New(t)
	keyPath, signer := testKey(t)
	seedReleases(t, db, signer)
	ctx := context.Background()
	r := startCLI(t, "lease", "renew", "--env", "prod", "--key", keyPath, "--database", db.URL, "--interval", "50ms")
	renewals := func() int { return r.count("prod: renewed 2 leases") }
	r.waitFor(t, "a first renewal", func() bool { return renewals() >= 1 })

	holder, err := pgx.Connect(ctx, db.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Close(context.Background())
	tx, err := holder.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, `SELECT 1 FROM configpub.environment WHERE env_tag = 'prod' FOR UPDATE`); err != nil {
		t.Fatal(err)
	}
	var victim int
	r.waitFor(t, "the renewal waiting on the lock", func() bool {
		err := holder.QueryRow(ctx, `SELECT pid FROM pg_stat_activity WHERE datname = current_database()
			AND wait_event_type = 'Lock' AND pid <> pg_backend_pid()`).Scan(&victim)
		return err == nil
	})
	var terminated bool
	if err := holder.QueryRow(ctx, `SELECT pg_terminate_backend($1)`, victim).Scan(&terminated); err != nil || !terminated {
		t.Fatalf("terminate backend %d: %v, %v", victim, terminated, err)
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	r.waitFor(t, "the failure reported", func() bool { return r.printed("renewal failed (1 in a row)") })
	before := renewals()
	r.waitFor(t, "a renewal after the failure", func() bool { return renewals() > before })
	r.stop(t)
	if !r.printed("next attempt in 50ms") {
		t.Errorf("the failure line does not say when it retries:\n%s", r.out.String())
	}
}

// TestLeaseRenewIntervalExitsOnItsFirstError: a renewer that has not renewed
// once exits on its error (a wrong environment is not retried for ever).
func TestLeaseRenewIntervalExitsOnItsFirstError(t *testing.T) {
	db := pgtest.New(t)
	keyPath, signer := testKey(t)
	seedReleases(t, db, signer)
	done := make(chan struct {
		out  string
		code int
	}, 1)
	go func() {
		out, code := runStore("lease", "renew", "--env", "nosuch", "--key", keyPath, "--database", db.URL, "--interval", "50ms")
		done <- struct {
			out  string
			code int
		}{out, code}
	}()
	select {
	case r := <-done:
		if r.code != 1 || !strings.Contains(r.out, "environment nosuch: not found") {
			t.Fatalf("got exit %d, output %q; want 1 naming the environment", r.code, r.out)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("lease renew --interval of a missing environment did not exit")
	}
}

func TestRetryAfter(t *testing.T) {
	for _, tc := range []struct {
		failures int
		interval time.Duration
		want     time.Duration
	}{
		{1, 2 * time.Minute, 5 * time.Second},
		{2, 2 * time.Minute, 10 * time.Second},
		{4, 2 * time.Minute, 40 * time.Second},
		{5, 2 * time.Minute, 80 * time.Second},
		{6, 2 * time.Minute, 2 * time.Minute},
		{1000, 2 * time.Minute, 2 * time.Minute},
		{1, time.Second, time.Second},
	} {
		if got := retryAfter(tc.failures, tc.interval); got != tc.want {
			t.Errorf("retryAfter(%d, %s) = %s, want %s", tc.failures, tc.interval, got, tc.want)
		}
	}
}

// TestLeaseRenewFollowsARotatedKey: a long-running renewer reads --key
// again before each renewal: a key rotated in the file (the same password)
// signs the next renewal; a file that cannot be used is reported once and
// the key in use goes on signing.
func TestLeaseRenewFollowsARotatedKey(t *testing.T) {
	db := pgtest.New(t)
	keyPath, signer := testKey(t)
	seedReleases(t, db, signer)
	ctx := context.Background()
	r := startCLI(t, "lease", "renew", "--env", "prod", "--key", keyPath, "--database", db.URL, "--interval", "50ms")
	signedBy := func(keyID string) func() bool {
		return func() bool {
			var n int
			err := db.Pool(t).QueryRow(ctx, `SELECT count(*) FROM configpub.current_pointer
				WHERE env_tag = 'prod' AND manifest_key_id <> $1`, keyID).Scan(&n)
			return err == nil && n == 0
		}
	}
	r.waitFor(t, "a first renewal", func() bool { return r.printed("prod: renewed 2 leases") })
	if !signedBy(signer.KeyID())() {
		t.Fatal("leases not signed by the first key")
	}

	if err := atomicfile.Write(keyPath, []byte("-----BEGIN ENCRYPTED SIGSTORE PRIVATE KEY-----\nhalf"), 0o600); err != nil {
		t.Fatal(err)
	}
	r.waitFor(t, "the unusable file reported", func() bool { return r.printed("changed but cannot be used") })
	before := r.count("prod: renewed 2 leases")
	r.waitFor(t, "renewals go on", func() bool { return r.count("prod: renewed 2 leases") > before+2 })
	if n := r.count("changed but cannot be used"); n != 1 {
		t.Fatalf("the unusable file reported %d times, want once:\n%s", n, r.out.String())
	}
	if !signedBy(signer.KeyID())() {
		t.Fatal("an unusable key file changed the signing key")
	}

	if r.printed("warning: signing with key") {
		t.Fatalf("a warning while the key signing was the one of the leases:\n%s", r.out.String())
	}

	next := rotateKey(t, keyPath)
	r.waitFor(t, "the new key announced", func() bool { return r.printed("signing with key " + next.KeyID()) })
	r.waitFor(t, "leases signed by the new key", signedBy(next.KeyID()))
	// The first renewal with the new key replaced leases of the old one:
	// said once, naming both keys.
	warning := "warning: signing with key " + next.KeyID() + ", but the current leases are signed by " + signer.KeyID()
	before = r.count("prod: renewed 2 leases")
	r.waitFor(t, "renewals go on", func() bool { return r.count("prod: renewed 2 leases") > before+2 })
	if n := r.count(warning); n != 1 {
		t.Fatalf("the other key warned %d times, want once:\n%s", n, r.out.String())
	}
	r.stop(t)
}
