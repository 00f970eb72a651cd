package workflowsvc_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/configpub/configpub/internal/pgtest"
	"github.com/configpub/configpub/promoter"
	"github.com/configpub/configpub/workflowsvc"
)

// TestMigrateUpgradesTheSchemaBeforeCallers: a database whose workflowsvc
// schema is the one before the caller columns (testdata/schema-7756c48.sql),
// holding an admitted invocation, and in which another table already has a
// constraint named invocation_caller_whole, is upgraded by Migrate: the
// invocation is kept as it was (no caller), the four caller columns and
// workflowsvc.invocation's own invocation_caller_whole exist, a second
// Migrate changes nothing, and the service admits work with and without a
// calling Agent on it.
func TestMigrateUpgradesTheSchemaBeforeCallers(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, db.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	old, err := os.ReadFile("testdata/schema-7756c48.sql")
	if err != nil {
		t.Fatal(err)
	}
	exec := func(sql string, args ...any) {
		t.Helper()
		if _, err := conn.Exec(ctx, sql, args...); err != nil {
			t.Fatalf("%v\n%s", err, sql)
		}
	}
	exec(string(old))
	// A constraint of the same name on a table of another schema: constraint
	// names are unique per table only.
	exec(`CREATE TABLE public.elsewhere (caller_host text, CONSTRAINT invocation_caller_whole CHECK (caller_host <> ''))`)
	oldID := id("inv", "before-the-upgrade")
	exec(`INSERT INTO workflowsvc.invocation (invocation_id, env_tag, wf_def_id, version, binding, view_id, view_digest,
			definition_digest, publication_id, release_version, compatibility_generation, limits, admitted_at)
		VALUES ($1::text::uuid, 'dev', $2::text::uuid, '1.0.0', $3, $4::text::uuid, $5, $5, $6::text::uuid, 1, 1, '{"maxSteps": 3}', $7)`,
		oldID, onboarding, binding, id("view", 1), digest([]byte("view")), id("pub", 1), t0)
	exec(`INSERT INTO workflowsvc.invocation_endpoint_target (invocation_id, service_id) VALUES ($1::text::uuid, $2)`, oldID, oldNotify)
	const oldRow = `SELECT to_jsonb(i) - ARRAY['caller_host', 'caller_service_id', 'caller_publication_id', 'caller_policy_digest']
		FROM workflowsvc.invocation i WHERE invocation_id = $1::text::uuid`
	var before string
	if err := conn.QueryRow(ctx, oldRow, oldID).Scan(&before); err != nil {
		t.Fatal(err)
	}

	if err := workflowsvc.Migrate(ctx, conn); err != nil {
		t.Fatalf("migrate the schema before callers: %v", err)
	}
	var after string
	if err := conn.QueryRow(ctx, oldRow, oldID).Scan(&after); err != nil || after != before {
		t.Fatalf("the invocation admitted before the upgrade is now %s (%v); want %s", after, err, before)
	}
	// catalog is what Migrate defines on workflowsvc.invocation: its
	// columns and its constraints (with their definitions) and the rows.
	catalog := func() string {
		t.Helper()
		var s string
		err := conn.QueryRow(ctx, `SELECT concat_ws(E'\n',
			(SELECT string_agg(attname || ' ' || format_type(atttypid, atttypmod) || CASE WHEN attnotnull THEN ' not null' ELSE '' END, E'\n' ORDER BY attnum)
				FROM pg_attribute WHERE attrelid = 'workflowsvc.invocation'::regclass AND attnum > 0 AND NOT attisdropped),
			(SELECT string_agg(conname || ' ' || pg_get_constraintdef(oid), E'\n' ORDER BY conname)
				FROM pg_constraint WHERE conrelid = 'workflowsvc.invocation'::regclass),
			(SELECT string_agg(tgname, E'\n' ORDER BY tgname) FROM pg_trigger WHERE tgrelid = 'workflowsvc.invocation'::regclass),
			(SELECT count(*)::text FROM workflowsvc.invocation))`).Scan(&s)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	upgraded := catalog()
	for _, want := range []string{"caller_host text", "caller_service_id text", "caller_publication_id uuid", "caller_policy_digest text",
		"invocation_caller_whole CHECK"} {
		if !strings.Contains(upgraded, want) {
			t.Errorf("upgraded workflowsvc.invocation lacks %q:\n%s", want, upgraded)
		}
	}
	var nullCallers bool
	if err := conn.QueryRow(ctx, `SELECT caller_host IS NULL AND caller_service_id IS NULL AND caller_publication_id IS NULL
			AND caller_policy_digest IS NULL FROM workflowsvc.invocation WHERE invocation_id = $1::text::uuid`, oldID).Scan(&nullCallers); err != nil || !nullCallers {
		t.Errorf("the invocation admitted before the upgrade has a caller (%v)", err)
	}
	// The constraint holds: half a caller is refused.
	_, err = conn.Exec(ctx, `INSERT INTO workflowsvc.invocation (invocation_id, env_tag, wf_def_id, version, binding, view_id, view_digest,
			definition_digest, publication_id, release_version, compatibility_generation, limits, admitted_at, caller_host)
		VALUES ($1::text::uuid, 'dev', $2::text::uuid, '1.0.0', $3, $4::text::uuid, $5, $5, $4::text::uuid, 1, 1, '{}', $6, 'h')`,
		id("inv", "half a caller"), onboarding, binding, id("view", 1), digest([]byte("view")), t0)
	if !strings.Contains(errString(err), "invocation_caller_whole") {
		t.Errorf("an invocation with only a caller host: %v, want refused by invocation_caller_whole", err)
	}
	if err := workflowsvc.Migrate(ctx, conn); err != nil {
		t.Fatalf("second migrate: %v", err)
	}
	if again := catalog(); again != upgraded {
		t.Errorf("a second Migrate changed workflowsvc.invocation:\n%s\nwas:\n%s", again, upgraded)
	}

	// The service on the upgraded database: the old invocation reads back
	// without a caller, new work is admitted with and without one.
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	store, err := promoter.Open(ctx, db.Pool(t), promoter.Options{Signer: key, Clock: func() time.Time { return t0 }})
	if err != nil {
		t.Fatal(err)
	}
	e := &env{db: db, store: store}
	svc := e.service(t, workflowsvc.RevokedDeny)
	if inv, err := svc.Invocation(ctx, oldID); err != nil || inv.Caller != nil || len(inv.EndpointTargets) != 1 {
		t.Fatalf("the invocation admitted before the upgrade: %+v, %v; want it without a caller, one endpoint target", inv, err)
	}
	res := compile(t, "", "")
	pub := id("pub", 1)
	in := releaseInput(1, res, pub)
	e.promote(t, in, res)
	agent := in.Targets[0]
	caller := workflowsvc.Caller{Host: agent.Host, ServiceID: agent.ServiceID, PublicationID: pub, PolicyDigest: agent.PolicyDigest}
	if a, err := svc.Admit(ctx, workflowsvc.AdmitRequest{InvocationID: id("inv", "with a caller"), EnvTag: "dev", WfDefID: onboarding,
		Version: "1.0.0", Binding: binding, Caller: &caller}); err != nil || a.Caller == nil || *a.Caller != caller {
		t.Fatalf("admit with a caller on the upgraded database: %+v, %v", a, err)
	}
	if b, err := svc.Admit(ctx, workflowsvc.AdmitRequest{InvocationID: id("inv", "without a caller"), EnvTag: "dev", WfDefID: onboarding,
		Version: "1.0.0", Binding: binding}); err != nil || b.Caller != nil {
		t.Fatalf("admit without a caller on the upgraded database: %+v, %v", b, err)
	}
	if _, err := svc.Admit(ctx, workflowsvc.AdmitRequest{InvocationID: id("inv", "forged"), EnvTag: "dev", WfDefID: onboarding,
		Version: "1.0.0", Binding: binding, Caller: &workflowsvc.Caller{Host: agent.Host, ServiceID: agent.ServiceID, PublicationID: pub,
			PolicyDigest: digest([]byte("forged"))}}); !errors.Is(err, workflowsvc.ErrCallerNotCurrent) {
		t.Fatalf("admit for a forged policy digest on the upgraded database: %v, want ErrCallerNotCurrent", err)
	}
}

// TestMigrateScopesItsTriggersToTheirTables: a database in which another
// table already has triggers named as workflowsvc's append-only ones
// (trigger names are unique per table only) is migrated: every workflowsvc
// table gets its own append-only and no-truncate triggers, UPDATE, DELETE
// and TRUNCATE of an admitted invocation are refused, the other table's
// triggers are left as they were, a second Migrate changes nothing, and a
// table missing only its no-truncate trigger gets it back.
func TestMigrateScopesItsTriggersToTheirTables(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, db.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	exec := func(sql string, args ...any) {
		t.Helper()
		if _, err := conn.Exec(ctx, sql, args...); err != nil {
			t.Fatalf("%v\n%s", err, sql)
		}
	}
	tables := []string{"invocation", "invocation_endpoint_target", "dispatch"}
	exec(`CREATE TABLE public.elsewhere (note text)`)
	exec(`CREATE FUNCTION public.elsewhere_audit() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RETURN NULL; END $$`)
	for _, tb := range tables {
		exec(fmt.Sprintf(`CREATE TRIGGER %s_append_only AFTER UPDATE ON public.elsewhere FOR EACH ROW EXECUTE FUNCTION public.elsewhere_audit()`, tb))
		exec(fmt.Sprintf(`CREATE TRIGGER %s_no_truncate AFTER TRUNCATE ON public.elsewhere FOR EACH STATEMENT EXECUTE FUNCTION public.elsewhere_audit()`, tb))
	}
	if err := workflowsvc.Migrate(ctx, conn); err != nil {
		t.Fatalf("migrate: %v", err)
	}
	// triggers lists the triggers of every workflowsvc table and of the
	// other table, by table.
	triggers := func() string {
		t.Helper()
		var s string
		if err := conn.QueryRow(ctx, `SELECT string_agg(tgrelid::regclass::text || ' ' || tgname, E'\n' ORDER BY tgrelid::regclass::text, tgname)
			FROM pg_trigger WHERE NOT tgisinternal
				AND tgrelid IN ('public.elsewhere'::regclass, 'workflowsvc.invocation'::regclass,
					'workflowsvc.invocation_endpoint_target'::regclass, 'workflowsvc.dispatch'::regclass)`).Scan(&s); err != nil {
			t.Fatal(err)
		}
		return s
	}
	var want []string
	for _, tb := range tables {
		want = append(want, "elsewhere "+tb+"_append_only", "elsewhere "+tb+"_no_truncate")
	}
	for _, tb := range []string{"dispatch", "invocation", "invocation_endpoint_target"} {
		want = append(want, "workflowsvc."+tb+" "+tb+"_append_only", "workflowsvc."+tb+" "+tb+"_no_truncate")
	}
	slices.Sort(want)
	got := triggers()
	if got != strings.Join(want, "\n") {
		t.Fatalf("triggers after Migrate:\n%s\nwant:\n%s", got, strings.Join(want, "\n"))
	}
	invID := id("inv", "append-only")
	exec(`INSERT INTO workflowsvc.invocation (invocation_id, env_tag, wf_def_id, version, binding, view_id, view_digest,
			definition_digest, publication_id, release_version, compatibility_generation, limits, admitted_at)
		VALUES ($1::text::uuid, 'dev', $2::text::uuid, '1.0.0', $3, $4::text::uuid, $5, $5, $6::text::uuid, 1, 1, '{"maxSteps": 3}', $7)`,
		invID, onboarding, binding, id("view", 1), digest([]byte("view")), id("pub", 1), t0)
	for _, stmt := range []string{
		`UPDATE workflowsvc.invocation SET env_tag = 'prod'`,
		`DELETE FROM workflowsvc.invocation`,
		`TRUNCATE workflowsvc.invocation CASCADE`,
		`TRUNCATE workflowsvc.dispatch`,
	} {
		if _, err := conn.Exec(ctx, stmt); !strings.Contains(errString(err), "is append-only") {
			t.Errorf("%s: %v, want refused as append-only", stmt, err)
		}
	}
	if err := workflowsvc.Migrate(ctx, conn); err != nil {
		t.Fatalf("second migrate: %v", err)
	}
	if again := triggers(); again != got {
		t.Errorf("a second Migrate changed the triggers:\n%s\nwas:\n%s", again, got)
	}
	// Each trigger is looked for on its own: a table that lost only its
	// no-truncate trigger gets it back.
	exec(`DROP TRIGGER dispatch_no_truncate ON workflowsvc.dispatch`)
	if err := workflowsvc.Migrate(ctx, conn); err != nil {
		t.Fatalf("migrate without dispatch_no_truncate: %v", err)
	}
	if again := triggers(); again != got {
		t.Errorf("Migrate without dispatch_no_truncate left the triggers:\n%s\nwant:\n%s", again, got)
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
