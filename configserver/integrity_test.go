package configserver_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/configpub/configpub/bundle"
	"github.com/configpub/configpub/internal/pointernote"
)

// TestRevokedAndInconsistentPointers: a current pointer to a revoked
// snapshot is not served (404), and a stored manifest that disagrees with
// its snapshot row is never served (500 with a body that says nothing).
func TestRevokedAndInconsistentPointers(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	ctx := context.Background()
	owner := e.db.Pool(t)

	sn := e.seed.publish(t, idA, "agent", 1, yamlBody("revoked-body"))
	e.seed.move(t, sn)
	waitServed(t, e, idA, "agent", sn.ID)
	tok := e.token(t, idA, "agent")
	if _, err := owner.Exec(ctx, `INSERT INTO configpub.revocation (snapshot_id, reason, actor, revoked_at)
		VALUES ($1, 'leaked', 'test', now())`, sn.ID); err != nil {
		t.Fatal(err)
	}
	// promoter.Revoke notifies in the same transaction with a payload that
	// names the snapshot, not an identity; the server reloads every pointer.
	revoked, _ := json.Marshal(pointernote.Note{Revoked: true, RevocationID: 1, SnapshotID: sn.ID})
	if _, err := owner.Exec(ctx, pointernote.SendSQL, string(revoked)); err != nil {
		t.Fatal(err)
	}
	waitStatus(t, e, configsPath(idA), tok, http.StatusNotFound)
	if resp, _ := e.do(t, "GET", "/configs/snapshots/"+sn.ID, tok); resp.StatusCode != http.StatusForbidden {
		t.Fatalf("revoked historical snapshot: got %d, want the 403 of an unknown snapshot", resp.StatusCode)
	}

	idB := bundle.Identity{Host: "h2.example", ServiceID: "svc-b", EnvTag: "prod"}
	snB := e.seed.publish(t, idB, "agent", 1, yamlBody("inconsistent-body"))
	ps := e.seed.move(t, snB)
	tokB := e.token(t, idB, "agent")
	waitServed(t, e, idB, "agent", snB.ID)
	// Store a validly signed manifest for another artifact under B's pointer.
	bad := *ps.Parsed
	bad.ArtifactDigest = digestOf([]byte("something else"))
	raw, _ := bad.Marshal()
	if _, err := owner.Exec(ctx, `UPDATE configpub.current_pointer SET manifest = $1 WHERE host = $2`, raw, idB.Host); err != nil {
		t.Fatal(err)
	}
	moved, _ := json.Marshal(pointernote.Note{Host: idB.Host, ServiceID: idB.ServiceID, EnvTag: idB.EnvTag})
	if _, err := owner.Exec(ctx, pointernote.SendSQL, string(moved)); err != nil {
		t.Fatal(err)
	}
	waitStatus(t, e, configsPath(idB), tokB, http.StatusInternalServerError)
	_, body := e.do(t, "GET", configsPath(idB), tokB)
	if bytes.Contains(body, []byte("inconsistent-body")) || bytes.Contains(body, []byte("sha256")) {
		t.Fatalf("500 body %q reveals stored data", body)
	}
}

func waitStatus(t *testing.T, e *env, path, tok string, want int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	got := 0
	for time.Now().Before(deadline) {
		resp, _ := e.do(t, "GET", path, tok)
		if got = resp.StatusCode; got == want {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("%s: got %d, want %d within 5s", path, got, want)
}
