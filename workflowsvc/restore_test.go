package workflowsvc_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"errors"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/configpub/configpub/internal/dbschema"
	"github.com/configpub/configpub/internal/pgcluster"
	"github.com/configpub/configpub/promoter"
	"github.com/configpub/configpub/workflowsvc"
)

// TestDispatchAfterARestoreLosesThePinnedView follows the documented
// backup and restore (pg_dump of configpub and configpub_workflow, the
// service's own schema kept): release 2 is activated after the backup and
// work is admitted under it, then the database is restored. Under
// RevokedDeny, dispatch said only "read pinned view …: no rows in result
// set"; it now says the pinned view is not recorded (ErrViewNotRecorded),
// that its revocation cannot be checked and what to do. Once release 2 is
// promoted again — from a commit whose view differs, so the pinned digest
// is recorded nowhere — dispatch follows its publication's revocation
// again: it was refused for good, although revocation is per publication
// and release 2's publication is recorded.
func TestDispatchAfterARestoreLosesThePinnedView(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	bin, err := pgcluster.FindBinDir()
	if err != nil {
		t.Fatal(err)
	}
	run := func(name string, args ...string) {
		t.Helper()
		if out, err := exec.CommandContext(ctx, filepath.Join(bin, name), args...).CombinedOutput(); err != nil {
			t.Fatalf("%s %v: %v\n%s", name, args, err, out)
		}
	}
	res1 := compile(t, "", "")
	res2 := compile(t, oldNotify, newNotify)
	pub1, pub2 := id("pub", 1), id("pub", 2)
	svc := e.service(t, workflowsvc.RevokedDeny)
	e.promote(t, releaseInput(1, res1, pub1), res1)

	dump := filepath.Join(t.TempDir(), "configpub.dump")
	run("pg_dump", "--format=custom", "--schema=configpub", "--schema=configpub_workflow", "--file="+dump, e.db.URL)

	e.promote(t, releaseInput(2, res2, pub2), res2)
	b := admit(t, svc, "b")
	if b.ReleaseVersion != 2 {
		t.Fatalf("b admitted under release %d, want 2", b.ReleaseVersion)
	}
	if _, err := svc.Dispatch(ctx, b.InvocationID, newNotify+"/send"); err != nil {
		t.Fatal(err)
	}

	if _, err := e.db.Pool(t).Exec(ctx, "DROP SCHEMA configpub CASCADE; DROP SCHEMA configpub_workflow CASCADE"); err != nil {
		t.Fatal(err)
	}
	run("pg_restore", "--dbname="+e.db.URL, "--single-transaction", dump)
	conn, err := pgx.Connect(ctx, e.db.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if err := dbschema.Migrate(ctx, conn); err != nil {
		t.Fatal(err)
	}

	_, err = svc.Dispatch(ctx, b.InvocationID, newNotify+"/send")
	if !errors.Is(err, workflowsvc.ErrViewNotRecorded) {
		t.Fatalf("dispatch under deny, pinned view lost by the restore: %v, want ErrViewNotRecorded", err)
	}
	for _, want := range []string{b.ViewID, "release 2", "restored", "promote"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	drain := e.service(t, workflowsvc.RevokedDrain)
	if _, err := drain.Dispatch(ctx, b.InvocationID, newNotify+"/send"); err != nil {
		t.Fatalf("dispatch under drain after the restore: %v", err)
	}

	// Release 2 again, from another commit: its view of 1.0.0 differs.
	res2b := compile(t, oldNotify, "com.networknt.notification-3.0.0")
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	store, err := promoter.Open(ctx, e.db.Pool(t), promoter.Options{Signer: key, Clock: func() time.Time { return t0.Add(time.Hour) }})
	if err != nil {
		t.Fatal(err)
	}
	e.store = store
	in := releaseInput(2, res2b, pub2)
	in.CommandID = id("cmd", 2, "again")
	e.promote(t, in, res2b)
	if _, err := svc.Dispatch(ctx, b.InvocationID, newNotify+"/send"); err != nil {
		t.Fatalf("dispatch under deny once release 2 (publication %s, not revoked) is recorded again: %v", pub2, err)
	}
	if _, err := e.store.Revoke(ctx, promoter.RevokeInput{CommandID: id("revoke", "after restore"), PublicationID: pub2, Reason: "bad", Actor: "a"}); err != nil {
		t.Fatal(err)
	}
	if _, err := svc.Dispatch(ctx, b.InvocationID, newNotify+"/send"); !errors.Is(err, workflowsvc.ErrRevoked) {
		t.Fatalf("dispatch under deny after release 2's publication is revoked: %v, want ErrRevoked", err)
	}
}
