package pgstore

import (
	"bufio"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/configpub/configpub/bundle"
	"github.com/configpub/configpub/internal/benchsize"
	"github.com/configpub/configpub/internal/pgtest"
	"github.com/configpub/configpub/internal/signing"
)

var (
	scaleIdentities = flag.Int("scale.identities", 10000, "BenchmarkServerScale: identities with a current pointer")
	scaleMemLimit   = flag.String("scale.gomemlimit", "384MiB", "BenchmarkServerScale: GOMEMLIMIT of the second store process (empty: no second run)")
)

// scaleServerEnv names the database URL of the Config Server store child
// process BenchmarkServerScale starts (see TestScaleServerProcess).
const scaleServerEnv = "CONFIGPUB_SCALE_SERVER_DATABASE_URL"

// TestScaleServerProcess is not a test: it is the store process
// BenchmarkServerScale measures, run as a child so that its memory is its
// own. It loads every pointer (LISTEN mode), prints "READY", then answers
// commands on standard input, one per line: "catchup" and "full" run one
// incremental or full reconcile on a connection of their own and print
// "OK <nanoseconds> <pointers>"; "heap" prints "OK <Go heap in use>".
func TestScaleServerProcess(t *testing.T) {
	url := os.Getenv(scaleServerEnv)
	if url == "" {
		t.Skip("only run as BenchmarkServerScale's server process")
	}
	opts := Options{StaleAfter: time.Minute, ReconcileInterval: time.Hour}
	poolCfg, err := PoolConfig(url, opts)
	if err != nil {
		t.Fatal(err)
	}
	pool, err := pgxpool.NewWithConfig(context.Background(), poolCfg)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	st, err := New(pool, opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	runDone := make(chan struct{})
	go func() { defer close(runDone); _ = st.Run(ctx) }()
	defer func() { cancel(); <-runDone }()
	for st.Ready(ctx) != nil {
		time.Sleep(time.Millisecond)
	}
	fmt.Println("READY", st.Stats().Pointers)
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	sc := bufio.NewScanner(os.Stdin)
	for sc.Scan() {
		t0 := time.Now()
		switch sc.Text() {
		case "catchup":
			err = st.catchUp(ctx, conn)
		case "full":
			err = st.reconcile(ctx, conn)
		case "heapprofile":
			f, err := os.Create(os.Getenv("SCALE_HEAPPROFILE"))
			if err != nil {
				t.Fatal(err)
			}
			runtime.GC()
			_ = pprof.Lookup("heap").WriteTo(f, 0)
			f.Close()
			fmt.Println("OK")
			continue
		case "heap":
			var ms runtime.MemStats
			runtime.ReadMemStats(&ms)
			fmt.Println("OK", ms.HeapInuse)
			continue
		}
		if err != nil {
			fmt.Println("ERR", err)
			continue
		}
		fmt.Println("OK", time.Since(t0).Nanoseconds(), st.Stats().Pointers)
	}
}

// scaleChild is a running TestScaleServerProcess.
type scaleChild struct {
	cmd     *exec.Cmd
	stdin   io.WriteCloser
	out     *bufio.Scanner
	started time.Time
	ready   time.Duration // process start -> every pointer loaded
}

func startScaleChild(b *testing.B, url string, env ...string) *scaleChild {
	b.Helper()
	c := &scaleChild{cmd: exec.Command(os.Args[0], "-test.run=^TestScaleServerProcess$", "-test.bench=^$", "-test.count=1")}
	c.cmd.Env = append(append(os.Environ(), scaleServerEnv+"="+url), env...)
	c.cmd.Stderr = os.Stderr
	var err error
	if c.stdin, err = c.cmd.StdinPipe(); err != nil {
		b.Fatal(err)
	}
	stdout, err := c.cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	c.out = bufio.NewScanner(stdout)
	c.started = time.Now()
	if err := c.cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(c.stop)
	for c.out.Scan() {
		if strings.HasPrefix(c.out.Text(), "READY") {
			c.ready = time.Since(c.started)
			return c
		}
	}
	b.Fatal("store process ended before it was ready")
	return nil
}

// do sends one command and returns the numbers of its OK answer.
func (c *scaleChild) do(b *testing.B, cmd string) []int64 {
	b.Helper()
	fmt.Fprintln(c.stdin, cmd)
	for c.out.Scan() {
		f := strings.Fields(c.out.Text())
		if len(f) == 0 {
			continue
		}
		if f[0] == "ERR" {
			b.Fatalf("%s: %s", cmd, c.out.Text())
		}
		if f[0] != "OK" {
			continue // test framework chatter
		}
		var out []int64
		for _, s := range f[1:] {
			n, _ := strconv.ParseInt(s, 10, 64)
			out = append(out, n)
		}
		return out
	}
	b.Fatalf("%s: store process ended", cmd)
	return nil
}

// mem returns the child's VmRSS and VmHWM (peak) in bytes.
func (c *scaleChild) mem(b *testing.B) (rss, hwm int64) {
	b.Helper()
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", c.cmd.Process.Pid))
	if err != nil {
		b.Fatal(err)
	}
	for _, line := range strings.Split(string(raw), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		kb, _ := strconv.ParseInt(f[1], 10, 64)
		switch f[0] {
		case "VmRSS:":
			rss = kb << 10
		case "VmHWM:":
			hwm = kb << 10
		}
	}
	return rss, hwm
}

func (c *scaleChild) stop() {
	if c.cmd.ProcessState != nil {
		return
	}
	c.stdin.Close()
	done := make(chan struct{})
	go func() { _ = c.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		_ = c.cmd.Process.Kill()
		<-done
	}
}

// scaleSeed writes n identities' artifacts, snapshots and current pointers
// (with real, signed delivery manifests of the promoter's shape) by COPY,
// then returns a function that re-signs every pointer with a later lease in
// one transaction (what a lease renewal of the whole environment writes).
func scaleSeed(b testing.TB, db *pgtest.DB, n int) (renew func()) {
	b.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, db.URL)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { conn.Close(context.Background()) })
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		b.Fatal(err)
	}
	tk, err := signing.NewTrustedKey(&key.PublicKey)
	if err != nil {
		b.Fatal(err)
	}
	publication := uuid.NewString()
	snaps := make([]*snap, n)
	manifests := make([]*bundle.DeliveryManifest, n)
	var artifacts, snapshots [][]any
	for i := range n {
		id := testIdentity(i)
		body := fmt.Sprintf("runtimePolicy:\n  host: %s\n  releaseVersion: 1\ngatewayPolicy:\n  routes: [\"/api/v1/items\"]\n", id.Host)
		sn := &snap{id: id, snapshotID: uuid.NewString(), publicationID: publication, artifact: sha(body),
			content: sha("c" + body), policy: sha(fmt.Sprint("p", i%50)), propertys: sha("props"), release: 1}
		snaps[i] = sn
		artifacts = append(artifacts, []any{sn.artifact, "application/yaml", []byte(body), len(body)})
		snapshots = append(snapshots, []any{sn.snapshotID, id.Host, id.ServiceID, id.EnvTag, "gateway", publication,
			uuid.NewString(), int64(1), int64(1), sn.artifact, sn.content, sn.policy, sn.propertys, 1, int64(0), int64(0), time.Now()})
	}
	copyIn := func(table string, cols []string, rows [][]any) {
		if _, err := conn.CopyFrom(ctx, pgx.Identifier{"configpub", table}, cols, pgx.CopyFromRows(rows)); err != nil {
			b.Fatalf("copy %s: %v", table, err)
		}
	}
	copyIn("artifact", []string{"artifact_digest", "media_type", "bytes", "size"}, artifacts)
	copyIn("config_snapshot", []string{"snapshot_id", "host", "service_id", "env_tag", "audience", "publication_id",
		"policy_snapshot_id", "policy_version", "release_version", "artifact_digest", "content_digest", "policy_digest",
		"property_set_digest", "schema_version", "compatibility_generation", "revocation_epoch", "created_at"}, snapshots)
	pointerRows := func(at time.Time, seq int64) [][]any {
		rows := make([][]any, n)
		for i, sn := range snaps {
			m := &bundle.DeliveryManifest{Type: bundle.DeliveryManifestType, Host: sn.id.Host, ServiceID: sn.id.ServiceID,
				EnvTag: sn.id.EnvTag, Audience: "gateway", SnapshotID: sn.snapshotID, PublicationID: publication,
				PolicySnapshotID: uuid.NewString(), ReleaseVersion: 1, ArtifactDigest: sn.artifact, ContentDigest: sn.content,
				PolicyDigest: sn.policy, PropertySetDigest: sn.propertys, SchemaVersion: 1, Sequence: seq,
				IssuedAt: at.Format(time.RFC3339), ValidFrom: at.Format(time.RFC3339),
				RefreshAfter: at.Add(5 * time.Minute).Format(time.RFC3339), ExpiresAt: at.Add(15 * time.Minute).Format(time.RFC3339)}
			manifests[i] = m
			raw, err := m.Marshal()
			if err != nil {
				b.Fatal(err)
			}
			sig, err := signing.SignBlob(key, raw)
			if err != nil {
				b.Fatal(err)
			}
			rows[i] = []any{sn.id.Host, sn.id.ServiceID, sn.id.EnvTag, sn.snapshotID, int64(1), seq, raw, sig, tk.ID,
				at, at.Add(5 * time.Minute), at.Add(15 * time.Minute), at, at}
		}
		return rows
	}
	pointerCols := []string{"host", "service_id", "env_tag", "snapshot_id", "release_version", "sequence", "manifest",
		"manifest_signature", "manifest_key_id", "lease_valid_from", "lease_refresh_after", "lease_expires_at", "moved_at", "updated_at"}
	now := time.Now().UTC().Truncate(time.Second)
	copyIn("current_pointer", pointerCols, pointerRows(now, now.UnixMicro()))
	if _, err := conn.Exec(ctx, "ANALYZE configpub.current_pointer, configpub.config_snapshot"); err != nil {
		b.Fatal(err)
	}
	return func() {
		at := now.Add(time.Minute)
		rows := pointerRows(at, now.UnixMicro())
		err := pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, `CREATE TEMP TABLE renewed (LIKE configpub.current_pointer INCLUDING DEFAULTS) ON COMMIT DROP`); err != nil {
				return err
			}
			if _, err := tx.CopyFrom(ctx, pgx.Identifier{"renewed"}, pointerCols, pgx.CopyFromRows(rows)); err != nil {
				return err
			}
			_, err := tx.Exec(ctx, `UPDATE configpub.current_pointer p SET manifest = r.manifest,
				manifest_signature = r.manifest_signature, lease_valid_from = r.lease_valid_from,
				lease_refresh_after = r.lease_refresh_after, lease_expires_at = r.lease_expires_at, updated_at = r.updated_at
				FROM renewed r WHERE (p.host, p.service_id, p.env_tag) = (r.host, r.service_id, r.env_tag)`)
			return err
		})
		if err != nil {
			b.Fatalf("renew every pointer: %v", err)
		}
	}
}

// BenchmarkServerScale is `make scale`'s server row: a Config Server store
// process holding -scale.identities current pointers. It reports the
// start-up (process start to every pointer loaded) against an in-run
// floor (the same rows read and discarded by one pgx query), the process's
// RSS and peak (during start-up, and overall: the incremental reconcile
// after every pointer was re-signed holds both versions of each for a
// moment) against the same process on an empty database, and the
// reconcile cost: incremental (nothing changed; after every pointer was
// re-signed) against the full reload it replaces; then the start-up again
// under a soft memory limit (-scale.gomemlimit), whose peak it reports.
// Bars: RSS <= 512 MiB once loaded, and peak <= 512 MiB with no memory
// limit and under the limit. Under -short (make bench-smoke), 1,000
// identities unless -scale.identities is given.
func BenchmarkServerScale(b *testing.B) {
	n := benchsize.Flag("scale.identities", scaleIdentities, 1000)
	for range b.N {
		ctx := context.Background()
		empty := pgtest.New(b)
		ec := startScaleChild(b, empty.URLFor(b, "configpub_server"))
		emptyRSS, _ := ec.mem(b)
		ec.stop()

		db := pgtest.New(b)
		t0 := time.Now()
		renew := scaleSeed(b, db, n)
		b.Logf("seeded %d identities in %s", n, time.Since(t0).Round(time.Millisecond))
		url := db.URLFor(b, "configpub_server")

		// The floor: one query streaming the same rows, discarded.
		conn, err := pgx.Connect(ctx, url)
		if err != nil {
			b.Fatal(err)
		}
		t0 = time.Now()
		rows, err := conn.Query(ctx, allPointersQuery)
		if err != nil {
			b.Fatal(err)
		}
		read := 0
		for rows.Next() {
			read++
		}
		if rows.Err() != nil || read != n {
			b.Fatalf("floor read %d rows (%v), want %d", read, rows.Err(), n)
		}
		floor := time.Since(t0)
		conn.Close(ctx)

		c := startScaleChild(b, url)
		rss, hwm := c.mem(b)
		heap := c.do(b, "heap")[0]
		if os.Getenv("SCALE_HEAPPROFILE") != "" {
			c.do(b, "heapprofile")
		}
		idle := c.do(b, "catchup")
		full := c.do(b, "full")
		renew()
		all := c.do(b, "catchup")
		if all[1] != int64(n) || idle[1] != int64(n) {
			b.Fatalf("store holds %d / %d pointers, want %d", idle[1], all[1], n)
		}
		after, hwmAfter := c.mem(b)
		c.stop()

		// The same start-up under a soft memory limit (GOMEMLIMIT): the
		// collector runs sooner instead of letting the heap double.
		var limitedPeak int64
		var limitedReady time.Duration
		if *scaleMemLimit != "" {
			lc := startScaleChild(b, url, "GOMEMLIMIT="+*scaleMemLimit)
			lc.do(b, "catchup")
			_, limitedPeak = lc.mem(b)
			limitedReady = lc.ready
			lc.stop()
			b.ReportMetric(float64(limitedPeak)/(1<<20), "peak-rss-memlimit-MiB")
			b.ReportMetric(limitedReady.Seconds(), "startup-memlimit-s")
		}

		perID := float64(rss-emptyRSS) / float64(n)
		b.ReportMetric(c.ready.Seconds(), "startup-s")
		b.ReportMetric(floor.Seconds(), "floor-read-s")
		b.ReportMetric(float64(rss)/(1<<20), "rss-MiB")
		b.ReportMetric(float64(max(hwm, hwmAfter))/(1<<20), "peak-rss-MiB")
		b.ReportMetric(float64(hwm)/(1<<20), "startup-peak-rss-MiB")
		b.ReportMetric(float64(emptyRSS)/(1<<20), "empty-rss-MiB")
		b.ReportMetric(perID, "rss-B/identity")
		b.ReportMetric(float64(heap)/(1<<20), "heap-MiB")
		b.ReportMetric(float64(idle[0])/1e6, "catchup-idle-ms")
		b.ReportMetric(float64(full[0])/1e6, "full-reconcile-ms")
		b.ReportMetric(float64(all[0])/1e6, "catchup-all-ms")
		b.ReportMetric(0, "ns/op")
		b.Logf("%d identities: start-up %s (floor: one query reading the rows %s); RSS %d MiB, peak %d MiB (%d MiB during start-up), after re-sign %d MiB "+
			"(empty store %d MiB; %.0f B per identity; Go heap %d MiB)", n, c.ready.Round(time.Millisecond), floor.Round(time.Millisecond),
			rss>>20, max(hwm, hwmAfter)>>20, hwm>>20, after>>20, emptyRSS>>20, perID, heap>>20)
		b.Logf("reconcile: incremental, nothing changed %s; full reload %s; incremental after every pointer re-signed %s; load average %s",
			time.Duration(idle[0]).Round(time.Microsecond), time.Duration(full[0]).Round(time.Millisecond),
			time.Duration(all[0]).Round(time.Millisecond), loadAverage())
		if *scaleMemLimit != "" {
			b.Logf("with GOMEMLIMIT=%s: start-up %s, peak RSS %d MiB", *scaleMemLimit, limitedReady.Round(time.Millisecond), limitedPeak>>20)
		}
		if rss > 512<<20 {
			b.Errorf("RSS %d MiB with every pointer loaded exceeds the 512 MiB bar", rss>>20)
		}
		if peak := max(hwm, hwmAfter); peak > 512<<20 {
			b.Errorf("peak RSS %d MiB without a memory limit exceeds the 512 MiB bar", peak>>20)
		}
		if limitedPeak > 512<<20 {
			b.Errorf("peak RSS %d MiB under GOMEMLIMIT=%s exceeds the 512 MiB bar", limitedPeak>>20, *scaleMemLimit)
		}
	}
}

func loadAverage() string {
	raw, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(raw))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}
