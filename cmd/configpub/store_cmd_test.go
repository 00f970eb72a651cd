package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/configpub/configpub/internal/atomicfile"
	"github.com/configpub/configpub/internal/cosignkey"
	"github.com/configpub/configpub/internal/dbschema"
	"github.com/configpub/configpub/internal/pgtest"
	"github.com/configpub/configpub/promoter"
)

// runStore runs the CLI and returns its output and exit code.
func runStore(args ...string) (string, int) {
	root := newRootCmd()
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&out)
	root.SetArgs(args)
	err := root.ExecuteContext(context.Background())
	if err != nil {
		out.WriteString("error: " + err.Error())
	}
	return out.String(), exitCode(err)
}

func sum(b []byte) string {
	s := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(s[:])
}

// seedReleases promotes two releases of env "prod" (two targets; release 2
// changes host-b) through the library and returns the snapshot ids by
// release. Each edit changes each release's input before it is recorded.
func seedReleases(t *testing.T, db *pgtest.DB, signer *cosignkey.Signer, edits ...func(*promoter.ReleaseInput)) map[int64][]string {
	t.Helper()
	ctx := context.Background()
	store, err := promoter.Open(ctx, db.Pool(t), promoter.Options{Signer: signer})
	if err != nil {
		t.Fatal(err)
	}
	snaps := map[int64][]string{}
	// The verbs run on the real clock: an activation window around it.
	validFrom := time.Now().UTC().Add(-time.Hour).Truncate(time.Second)
	for v := int64(1); v <= 2; v++ {
		in := promoter.ReleaseInput{
			CommandID: uuid.NewString(), EnvTag: "prod", ReleaseVersion: v, BaseReleaseVersion: v - 1,
			ManifestBytes: []byte(fmt.Sprintf("release %d", v)), Actor: "alice", Reason: fmt.Sprintf("release %d", v),
			// Release 2 is a renewal: compiled from release 1's sources, it
			// re-issues host-b's snapshot.
			SourcesDigest: "sha256:" + strings.Repeat("5", 64),
		}
		for i, host := range []string{"host-a", "host-b"} {
			created := v
			if host == "host-a" {
				created = 1
			}
			values := []byte(fmt.Sprintf("host: %s\nrelease: %d\n", host, created))
			in.Targets = append(in.Targets, promoter.Target{
				Host: host, ServiceID: "svc", EnvTag: "prod", Audience: "gateway",
				SnapshotID:       uuid.NewSHA1(uuid.NameSpaceURL, []byte(fmt.Sprint(host, created))).String(),
				PublicationID:    uuid.NewSHA1(uuid.NameSpaceURL, []byte(fmt.Sprint("pub", created))).String(),
				PolicySnapshotID: uuid.NewSHA1(uuid.NameSpaceURL, []byte(fmt.Sprint("pol", host, created))).String(),
				ReleaseVersion:   created, PolicyVersion: created,
				PolicyDigest: sum([]byte(fmt.Sprint("p", i, created))), ContentDigest: sum([]byte(fmt.Sprint("c", i, created))),
				PropertySetDigest: sum([]byte("ps")), ArtifactDigest: sum(values), Values: values,
				CreatedAt: time.Date(2026, 11, 29, 0, 0, 0, 0, time.UTC),
				ValidFrom: validFrom, ExpiresAt: validFrom.Add(25 * time.Hour),
				Lease: promoter.LeaseWindow{RefreshAfter: time.Minute, ExpiresAfter: time.Hour},
			})
			snaps[v] = append(snaps[v], in.Targets[i].SnapshotID)
		}
		for _, edit := range edits {
			edit(&in)
		}
		if _, err := store.RecordAndActivate(ctx, in); err != nil {
			t.Fatal(err)
		}
	}
	return snaps
}

// testKey writes a new cosign key pair, its private key encrypted with the
// password "pw" (set as the verbs read it, in the environment), to a
// temporary directory: the private key's path and its signer.
func testKey(t *testing.T) (keyPath string, signer *cosignkey.Signer) {
	t.Helper()
	t.Setenv(cosignkey.PasswordEnv, "pw")
	kp, err := cosignkey.GenerateKeyPair([]byte("pw"))
	if err != nil {
		t.Fatal(err)
	}
	if keyPath, _, err = cosignkey.WriteKeyPair(t.TempDir(), kp); err != nil {
		t.Fatal(err)
	}
	if signer, err = cosignkey.LoadPrivateKeyFile(keyPath, []byte("pw")); err != nil {
		t.Fatal(err)
	}
	return keyPath, signer
}

// rotateKey replaces the key file at keyPath, in one rename, with a new key
// encrypted with the same password ("pw"), and returns its signer.
func rotateKey(t *testing.T, keyPath string) *cosignkey.Signer {
	t.Helper()
	kp, err := cosignkey.GenerateKeyPair([]byte("pw"))
	if err != nil {
		t.Fatal(err)
	}
	next, err := cosignkey.LoadPrivateKey(kp.PrivatePEM, []byte("pw"))
	if err != nil {
		t.Fatal(err)
	}
	if err := atomicfile.Write(keyPath, kp.PrivatePEM, 0o600); err != nil {
		t.Fatal(err)
	}
	return next
}

func TestStoreVerbs(t *testing.T) {
	db := pgtest.New(t)
	keyPath, signer := testKey(t)
	snaps := seedReleases(t, db, signer)
	d := "--database=" + db.URL
	// An artifact stored ahead by a promotion that never recorded.
	orphan := []byte("host: host-c\nrelease: 3\n")
	store, err := promoter.Open(context.Background(), db.Pool(t), promoter.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := store.StoreArtifacts(context.Background(), []promoter.Artifact{{Digest: sum(orphan), Bytes: orphan}}); err != nil {
		t.Fatal(err)
	}
	// Two lease renewals a runtime reported: the first is superseded.
	for range 2 {
		if _, err := db.Pool(t).Exec(context.Background(), `INSERT INTO configpub.runtime_evidence
			(host, service_id, env_tag, outcome, reason, artifact_digest, content_digest, policy_digest)
			VALUES ('host-a', 'svc', 'prod', 'APPLIED', 'LEASE_RENEWED', '', '', '')`); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(5 * time.Millisecond) // older than the store clock's millisecond

	tests := []struct {
		name     string
		args     []string
		wantCode int
		want     []string
	}{
		{"migrate again is a no-op", []string{"db", "migrate", d}, 0, []string{"applied 0 migration(s)"}},
		{"migrate as the promoter's login says whom to run it as", []string{"db", "migrate", "--database=" + db.URLFor(t, "configpub_promoter")}, 1,
			[]string{"SQLSTATE 42501", "db migrate runs as the schema owner"}},
		{"gc keeps a day's artifacts", []string{"db", "gc", d}, 0, []string{"nothing to delete"}},
		{"gc dry run", []string{"db", "gc", "--min-age", "1ms", "--dry-run", d}, 0,
			[]string{fmt.Sprintf("would delete 1 unreferenced artifact(s), %d bytes", len(orphan))}},
		{"gc", []string{"db", "gc", "--min-age", "1ms", "-o", "json", d}, 0, []string{`"artifacts": 1,`, fmt.Sprintf(`"bytes": %d,`, len(orphan)), `"dryRun": false`}},
		{"gc again", []string{"db", "gc", "--min-age", "1ms", d}, 0, []string{"nothing to delete"}},
		{"gc needs a positive age", []string{"db", "gc", "--min-age", "0s", d}, 2, []string{"--min-age must be positive"}},
		{"gate -o json needs --once", []string{"gate", "--env", "prod", "--key", keyPath, "-o", "json", d}, 2, []string{"--output json needs --once"}},
		{"gate --once -o json", []string{"gate", "--env", "prod", "--key", keyPath, "--once", "-o", "json", d}, 0, []string{`"envTag": "prod"`, `"release": 2`, `"verdict": "`}},
		{"gate --once of an environment that does not exist", []string{"gate", "--env", "prod", "--env", "prdo", "--key", keyPath, "--once", "-o", "json", d}, 1,
			[]string{"health gate prdo: environment prdo: not found"}},
		{"gate's old --poll sets --interval", []string{"gate", "--env", "prod", "--key", keyPath, "--poll", "0s", d}, 2, []string{"--interval must be positive"}},
		{"lease renew's old --every sets --interval", []string{"lease", "renew", "--env", "prod", "--key", keyPath, "--every", "-1s", d}, 2, []string{"--interval must not be negative"}},
		{"lease renew --registry without --attach", []string{"lease", "renew", "--env", "prod", "--key", keyPath, "--registry", "reg.example/configpub", d}, 2, []string{"--registry is where --attach attaches"}},
		{"status text", []string{"status", "--env", "prod", d}, 0, []string{"current release 2", "host-a/svc", "PUBLISHED"}},
		{"bad format", []string{"status", "--env", "prod", "--output", "xml", d}, 2, []string{"--output"}},
		{"rollback needs a key", []string{"rollback", "--env", "prod", "--release", "1", "--reason", "r", "--actor", "a", d}, 2, []string{"key"}},
		{"rollback", []string{"rollback", "--env", "prod", "--release", "1", "--reason", "bad", "--actor", "oncall", "--key", keyPath, d}, 0,
			[]string{"prod rollback release 1 (from 2): done; 1 pointers moved, 1 unchanged",
				"release 2 can be returned to until 20", ": configpub activate --env prod --release 2 --reason TEXT --actor NAME --key cosign.key\n"}},
		{"rollback again is refused", []string{"rollback", "--env", "prod", "--release", "1", "--reason", "bad", "--actor", "oncall", "--key", keyPath, d}, 1,
			[]string{"release 1 is already the active release of prod; nothing moved"}},
		{"rollback to a release that does not exist", []string{"rollback", "--env", "prod", "--release", "5", "--reason", "bad", "--actor", "oncall", "--key", keyPath, d}, 1,
			[]string{"release 5 does not exist in prod (the latest recorded release is 2)"}},
		{"status of an environment that does not exist", []string{"status", "--env", "nosuch", d}, 1, []string{"nosuch", "not found"}},
		{"lease renew of an environment that does not exist", []string{"lease", "renew", "--env", "nosuch", "--key", keyPath, d}, 1, []string{"environment nosuch: not found"}},
		{"reconcile of an environment that does not exist", []string{"reconcile", "--env", "nosuch", d}, 1, []string{"environment nosuch: not found"}},
		{"forward", []string{"activate", "--env", "prod", "--release", "2", "--reason", "fixed", "--actor", "oncall", "--key", keyPath,
			"--command-id", "0b4e1a4e-43c1-4b9e-9a55-1c8a2a0b0c01", d}, 0, []string{"activate release 2 (from 1): done",
			"release 1 can be returned to until 20", ": configpub rollback --env prod --release 1 --reason TEXT --actor NAME --key cosign.key\n"}},
		{"forward replay", []string{"activate", "--env", "prod", "--release", "2", "--reason", "fixed", "--actor", "oncall", "--key", keyPath,
			"--command-id", "0b4e1a4e-43c1-4b9e-9a55-1c8a2a0b0c01", d}, 0, []string{"already done (replayed)"}},
		{"history", []string{"history", "--env", "prod", "--target", "host-b/svc", d}, 0, []string{"promote", "rollback", "activate", "oncall", "bad"}},
		{"history --limit -1 names it", []string{"history", "--env", "prod", "--limit", "-1", d}, 2, []string{"--limit -1: want the number of newest entries, or 0 for all"}},
		{"lease renew", []string{"lease", "renew", "--env", "prod", "--key", keyPath, d}, 0, []string{"renewed 2 leases"}},
		{"lease renew again", []string{"lease", "renew", "--env", "prod", "--key", keyPath, d}, 0, []string{"renewed 2 leases"}},
		{"gc keeps a month's renewals", []string{"db", "gc", d}, 0, []string{"no superseded lease renewal issued before"}},
		{"gc superseded renewals", []string{"db", "gc", "--renewal-min-age", "1ms", "-o", "json", d}, 0, []string{`"manifests": 2,`, `"minAge": "1ms"`}},
		{"gc renewals again", []string{"db", "gc", "--renewal-min-age", "1ms", d}, 0, []string{"no superseded lease renewal issued before"}},
		{"gc renewal age must not be negative", []string{"db", "gc", "--renewal-min-age", "-1s", d}, 2, []string{"--renewal-min-age must not be negative"}},
		{"gc keeps a month's observations", []string{"db", "gc", d}, 0, []string{"no superseded APPLIED observation reported before"}},
		{"gc superseded observations, dry run", []string{"db", "gc", "--observation-min-age", "1ms", "--dry-run", d}, 0,
			[]string{"would delete 1 superseded APPLIED observation(s)"}},
		{"gc superseded observations", []string{"db", "gc", "--observation-min-age", "1ms", "-o", "json", d}, 0,
			[]string{`"observations": {`, `"deleted": 1,`, `"reportedBefore": "`}},
		{"gc observations again", []string{"db", "gc", "--observation-min-age", "1ms", d}, 0, []string{"no superseded APPLIED observation reported before"}},
		{"gc observation age must not be negative", []string{"db", "gc", "--observation-min-age", "-1s", d}, 2, []string{"--observation-min-age must not be negative"}},
		{"gc keeps a month's receipts", []string{"db", "gc", d}, 0, []string{"no repeated APPLIED receipt reported before"}},
		{"gc repeated receipts", []string{"db", "gc", "--receipt-min-age", "1ms", "-o", "json", d}, 0, []string{`"receipts": {`, `"minAge": "1ms"`}},
		{"gc receipt age must not be negative", []string{"db", "gc", "--receipt-min-age", "-1s", d}, 2, []string{"--receipt-min-age must not be negative"}},
		{"reconcile", []string{"reconcile", "--env", "prod", d}, 0, []string{"nothing unconfirmed; current release 2"}},
		{"epoch needs a key", []string{"revoke", "--epoch", "3", "--env", "prod", "--reason", "leak", "--actor", "sec", d}, 2, []string{"--epoch needs --env and --key"}},
		{"raise the epoch", []string{"revoke", "--epoch", "3", "--env", "prod", "--reason", "leak", "--actor", "sec", "--key", keyPath, d}, 0,
			[]string{"prod revocation epoch 0 -> 3: 2 current pointers re-signed (release 2 active)"}},
		{"the epoch is never lowered", []string{"revoke", "--epoch", "2", "--env", "prod", "--reason", "oops", "--actor", "sec", "--key", keyPath, d}, 1,
			[]string{"2 is not above the current revocation epoch 3 of prod (an epoch is never lowered)"}},
		{"lease resign", []string{"lease", "resign", "--env", "prod", "--reason", "restored", "--actor", "oncall", "--key", keyPath, d}, 0,
			[]string{"prod: 2 current pointers re-signed with new sequences (release 2 active, revocation epoch 3)"}},
		{"lease resign needs a reason", []string{"lease", "resign", "--env", "prod", "--key", keyPath, d}, 2, []string{"reason"}},
		{"revoke", []string{"revoke", "--snapshot", snaps[1][1], "--reason", "leak", "--actor", "sec", d}, 0, []string{"revoked snapshot " + snaps[1][1]}},
		{"revoked is never activated", []string{"rollback", "--env", "prod", "--release", "1", "--reason", "r", "--actor", "a", "--key", keyPath, d}, 1,
			[]string{"revoked"}},
		{"revoke needs one id", []string{"revoke", "--reason", "x", d}, 2, []string{"exactly one"}},
		{"revoke needs only one id", []string{"revoke", "--snapshot", snaps[1][1], "--epoch", "4", "--reason", "x", d}, 2, []string{"exactly one"}},
		{"epoch 0 names --epoch", []string{"revoke", "--epoch", "0", "--env", "prod", "--reason", "x", "--actor", "sec", "--key", keyPath, d}, 2,
			[]string{"--epoch 0: want a positive epoch"}},
		{"a negative epoch names --epoch", []string{"revoke", "--epoch", "-1", "--env", "prod", "--reason", "x", "--actor", "sec", "--key", keyPath, d}, 2,
			[]string{"--epoch -1: want a positive epoch"}},
	}
	for _, tc := range tests {
		out, code := runStore(tc.args...)
		if code != tc.wantCode {
			t.Errorf("%s: got exit %d, want %d\n%s", tc.name, code, tc.wantCode, out)
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(out, w) {
				t.Errorf("%s: output lacks %q:\n%s", tc.name, w, out)
			}
		}
	}

	// A refused epoch names its command once (the store's error names it).
	const cmdID = "5f9d10f5-390a-4056-97f2-26b2befc3c3c"
	if out, code := runStore("revoke", "--epoch", "9", "--env", "nosuch", "--reason", "x", "--actor", "sec", "--key", keyPath, "--command-id", cmdID, d); code != 1 ||
		strings.Count(out, cmdID) != 1 || !strings.Contains(out, "nosuch") {
		t.Errorf("epoch of an environment that does not exist: exit %d, want 1 naming nosuch and the command once:\n%s", code, out)
	}

	// --renewal-min-age 0 keeps every renewal: the report has no renewals;
	// the same for observations.
	if out, code := runStore("db", "gc", "--renewal-min-age", "0", "--observation-min-age", "0", "--receipt-min-age", "0", "-o", "json", d); code != 0 ||
		strings.Contains(out, `"renewals"`) || strings.Contains(out, `"observations"`) || strings.Contains(out, `"receipts"`) ||
		!strings.Contains(out, `"artifacts": 0`) {
		t.Errorf("gc keeping every renewal and observation: exit %d, want 0 and a report without either:\n%s", code, out)
	}

	out, code := runStore("status", "--env", "prod", "--output", "json", d)
	if code != 0 {
		t.Fatalf("status json: exit %d: %s", code, out)
	}
	var st struct {
		EnvTag         string           `json:"envTag"`
		CurrentRelease int64            `json:"currentRelease"`
		Targets        []map[string]any `json:"targets"`
	}
	if err := json.Unmarshal([]byte(out), &st); err != nil {
		t.Fatalf("status json: %v\n%s", err, out)
	}
	if st.EnvTag != "prod" || st.CurrentRelease != 2 || len(st.Targets) != 2 {
		t.Fatalf("got %+v, want prod at release 2 with 2 targets", st)
	}
	for _, k := range []string{"host", "serviceId", "envTag", "audience", "snapshotId", "releaseVersion",
		"artifactDigest", "contentDigest", "policyDigest", "state"} {
		if _, ok := st.Targets[0][k]; !ok {
			t.Errorf("status json target lacks %q: %v", k, st.Targets[0])
		}
	}
}

func TestUnconfirmedIsExit3(t *testing.T) {
	err := storeError(fmt.Errorf("commit: %w", promoter.ErrUnconfirmed), "prod")
	if got := exitCode(err); got != exitUnconfirmed {
		t.Fatalf("got exit %d, want %d", got, exitUnconfirmed)
	}
	if !strings.Contains(err.Error(), "configpub reconcile --env prod") {
		t.Fatalf("got %q, want the reconcile hint", err)
	}
}

// TestDBMigrateOnADatabaseANewerBinaryMigrated: an upgrade under way — a
// newer configpub migrated the database and a CI runner still on this one
// runs the shipped workflow's `db migrate`. It applies nothing, warns that
// the binary should be upgraded, and exits 0 (its promote runs on), as
// Flyway treats "future" migrations; the message no longer blames
// migration 001.
func TestDBMigrateOnADatabaseANewerBinaryMigrated(t *testing.T) {
	db := pgtest.New(t)
	if _, err := db.Pool(t).Exec(context.Background(), `INSERT INTO configpub.schema_migration (version, name, checksum)
		VALUES (999, 'from_the_future', 'sha256:00')`); err != nil {
		t.Fatal(err)
	}
	latest, err := dbschema.Latest()
	if err != nil {
		t.Fatal(err)
	}
	out, err := runCLI("db", "migrate", "-o", "json", "--database="+db.URL)
	if err != nil {
		t.Fatalf("db migrate on a newer database: %v\n%s", err, out)
	}
	for _, want := range []string{"warning: the database is at migration 999, newer than this configpub's " + strconv.Itoa(latest),
		"Upgrade this binary", `"applied": 0`, `"databaseVersion": 999`, `"schemaVersion": ` + strconv.Itoa(latest)} {
		if !strings.Contains(out, want) {
			t.Errorf("db migrate output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "001_init") {
		t.Errorf("db migrate output blames migration 001:\n%s", out)
	}
}

// TestRevokeSaysWhatItCovers: revoke's output (text and -o json) says what
// the revocation covers. A publication that exists only as Workflow views
// (a release that created no snapshot) revokes no runtime's configuration:
// before, its output read like every other revocation ("revoked publication
// …"), and an operator could believe runtimes were cut off.
func TestRevokeSaysWhatItCovers(t *testing.T) {
	db := pgtest.New(t)
	_, signer := testKey(t)
	seedReleases(t, db, signer)
	d := "--database=" + db.URL
	ctx := context.Background()
	// A Workflow view recorded for release 2 under a publication of its
	// own, as for a release that created no snapshot.
	viewsOnly := uuid.NewSHA1(uuid.NameSpaceURL, []byte("views-only")).String()
	doc := []byte("workflow: onboarding\n")
	if _, err := db.Pool(t).Exec(ctx, `WITH v AS (
			INSERT INTO configpub.workflow_view (view_digest, wf_def_id, version, workflow, state, definition_digest,
				compatibility_generation, limits, approvals, agents, tools, runner, retention, endpoint_targets, document, document_digest)
			VALUES ($1, $2, '1.0.0', 'onboarding', 'PUBLISHED', $1, 1, '{}', '[]', '[]', '["notify"]', '{}', '{}', '[]', $3, $4)
			RETURNING view_digest, wf_def_id, version)
		INSERT INTO configpub.workflow_release_view (env_tag, release_version, wf_def_id, version, view_id, view_digest,
			publication_id, release_digest, definition_hash, accepted_publications, command_id, recorded_at)
		SELECT 'prod', 2, wf_def_id, version, gen_random_uuid(), view_digest, $5, $1, $1, '[]', gen_random_uuid(), now() FROM v`,
		sum([]byte("view")), uuid.NewString(), doc, sum(doc), viewsOnly); err != nil {
		t.Fatal(err)
	}
	pub1 := uuid.NewSHA1(uuid.NameSpaceURL, []byte("pub1")).String() // release 1's: host-a's and host-b's snapshots
	for _, c := range []struct {
		args []string
		want []string
	}{
		{[]string{"--publication", viewsOnly}, []string{"revoked publication " + viewsOnly,
			"\ncovers 1 Workflow view(s) only, no snapshot: no runtime's configuration is revoked;"}},
		{[]string{"--publication", viewsOnly, "-o", "json"}, []string{`"covers": "views"`, `"snapshots": 0,`, `"workflowViews": 1`,
			`"currentCount": 0`}},
		{[]string{"--publication", pub1}, []string{"revoked publication " + pub1, "\ncovers 2 snapshot(s): runtimes lose them",
			"currently pointed at by 1: host-a/svc/prod"}},
		{[]string{"--publication", pub1, "-o", "json"}, []string{`"covers": "snapshots"`, `"snapshots": 2,`, `"workflowViews": 0`}},
	} {
		args := append([]string{"revoke", "--reason", "bad", "--actor", "sec", d}, c.args...)
		out, code := runStore(args...)
		if code != 0 {
			t.Errorf("%s: exit %d\n%s", strings.Join(c.args, " "), code, out)
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(out, w) {
				t.Errorf("revoke %s: output lacks %q:\n%s", strings.Join(c.args, " "), w, out)
			}
		}
	}
}
