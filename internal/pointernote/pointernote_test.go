package pointernote

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/configpub/configpub/internal/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

func TestRevocationPayloadKeepsItsEncoding(t *testing.T) {
	b, err := json.Marshal(Note{Revoked: true, RevocationID: 7, PublicationID: "p"})
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"revoked":true,"revocationId":7,"publicationId":"p"}`; string(b) != want {
		t.Fatalf("got %s, want %s", b, want)
	}
}

func TestSingleIdentityPayloadStillParses(t *testing.T) {
	var n Note
	if err := json.Unmarshal([]byte(`{"host":"h","serviceId":"s","envTag":"e","snapshotId":"x","sequence":3}`), &n); err != nil {
		t.Fatal(err)
	}
	if n.Host != "h" || n.ServiceID != "s" || n.EnvTag != "e" || n.Range != nil {
		t.Fatalf("got %+v, want the single-identity form", n)
	}
}

// TestBatchesCoverEveryIdentityOnceInBoundedNotifications sends the batches
// of 4,500 identities (given out of order, host names whose order differs
// between bytes and a linguistic collation) on a real LISTEN connection and
// checks that there are ceil(4500/BatchSize) notifications, that RangeSQL
// selects exactly each batch's identities from a table of all of them, and
// that the ranges are disjoint and cover every identity once.
func TestBatchesCoverEveryIdentityOnceInBoundedNotifications(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := pgtest.New(t)
	pool := db.Pool(t)
	const n = 4500
	hosts, svcs := make([]string, n), make([]string, n)
	for i := range n {
		j := (i * 7919) % n // a permutation: the input order is not the range order
		hosts[i], svcs[i] = fmt.Sprintf("Host-%d.example", j), fmt.Sprintf("svc_%d", j%3)
	}
	if _, err := pool.Exec(ctx, `CREATE TABLE ids (env_tag text, host text, service_id text)`); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `INSERT INTO ids SELECT 'prod', h, sv FROM unnest($1::text[], $2::text[]) AS x(h, sv)`, hosts, svcs); err != nil {
		t.Fatal(err)
	}
	// Another environment's identities are never selected by a range.
	if _, err := pool.Exec(ctx, `INSERT INTO ids SELECT 'dev', h, sv FROM unnest($1::text[], $2::text[]) AS x(h, sv)`, hosts, svcs); err != nil {
		t.Fatal(err)
	}
	listener, err := pgx.Connect(ctx, pool.Config().ConnConfig.ConnString())
	if err != nil {
		t.Fatal(err)
	}
	defer listener.Close(ctx)
	if _, err := listener.Exec(ctx, "LISTEN "+Channel); err != nil {
		t.Fatal(err)
	}
	var sent int
	if err := pool.QueryRow(ctx, BatchesSQL("$1::text", "h", "sv", "unnest($2::text[], $3::text[]) AS x(h, sv)"),
		"prod", hosts, svcs).Scan(&sent); err != nil {
		t.Fatal(err)
	}
	want := (n + BatchSize - 1) / BatchSize
	if sent != want {
		t.Fatalf("sent %d notifications, want %d", sent, want)
	}
	seen := map[string]int{}
	total := 0
	for k := range want {
		wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		got, err := listener.WaitForNotification(wctx)
		cancel()
		if err != nil {
			t.Fatalf("notification %d of %d: %v", k+1, want, err)
		}
		if len(got.Payload) > 7999 {
			t.Fatalf("payload of %d bytes exceeds NOTIFY's limit", len(got.Payload))
		}
		var note Note
		if err := json.Unmarshal([]byte(got.Payload), &note); err != nil || note.Range == nil || note.EnvTag != "prod" {
			t.Fatalf("payload %s: %v, want a batch of prod", got.Payload, err)
		}
		r := note.Range
		rows, err := pool.Query(ctx, `SELECT host, service_id FROM ids p WHERE `+RangeSQL,
			note.EnvTag, r.FromHost, r.FromServiceID, r.ToHost, r.ToServiceID)
		if err != nil {
			t.Fatal(err)
		}
		selected := 0
		for rows.Next() {
			var h, sv string
			if err := rows.Scan(&h, &sv); err != nil {
				t.Fatal(err)
			}
			seen[h+"/"+sv]++
			selected++
		}
		if rows.Err() != nil {
			t.Fatal(rows.Err())
		}
		if selected != r.Count {
			t.Fatalf("range %+v selects %d identities, its count says %d", r, selected, r.Count)
		}
		total += r.Count
	}
	if total != n || len(seen) != n {
		t.Fatalf("ranges cover %d identities (%d distinct), want %d", total, len(seen), n)
	}
	for k, c := range seen {
		if c != 1 {
			t.Fatalf("identity %s is in %d ranges, want 1", k, c)
		}
	}
	wctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	if extra, err := listener.WaitForNotification(wctx); err == nil {
		t.Fatalf("an extra notification: %s", extra.Payload)
	}
}
