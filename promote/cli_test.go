package promote_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/url"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/configpub/configpub/internal/cosignkey"
	"github.com/configpub/configpub/internal/gittest"
	"github.com/configpub/configpub/internal/promotertest"
	"github.com/configpub/configpub/promoter"
)

// cliHarness runs the built configpub binary against a promotertest.Harness.
type cliHarness struct {
	*promotertest.Harness
	bin string
}

func newCLIHarness(t *testing.T) *cliHarness {
	t.Helper()
	if testing.Short() {
		t.Skip("builds the configpub binary; skipped under -short")
	}
	return &cliHarness{Harness: promotertest.New(t), bin: promotertest.BuildConfigpub(t)}
}

// run executes `configpub promote` with the harness's flags plus extra and
// returns the exit code and combined output.
func (c *cliHarness) run(t *testing.T, dbURL string, extra ...string) (int, string) {
	t.Helper()
	args := []string{"promote", "--repo", c.Repo.Git.Dir, "--env", promotertest.Env, "--registry", c.Prefix, "--plain-http", "--key", c.KeyPath}
	if dbURL != "" {
		args = append(args, "--database", dbURL)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, c.bin, append(args, extra...)...)
	cmd.Env = append(os.Environ(), cosignkey.PasswordEnv+"="+c.Password, "CONFIGPUB_DATABASE_URL=")
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	switch {
	case err == nil:
		return 0, string(out)
	case errors.As(err, &exit):
		return exit.ExitCode(), string(out)
	default:
		t.Fatalf("run configpub: %v", err)
		return -1, ""
	}
}

func TestPromoteCLIExitCodes(t *testing.T) {
	c := newCLIHarness(t)
	url := c.DB.URLFor(t, "configpub_promoter")
	envFile := "environments/" + promotertest.Env + ".yaml"
	edited := append(c.Repo.Git.Files(c.Repo.R2)[envFile], "# edited, not compiled\n"...)
	c.Repo.Git.Commit(gittest.Commit{Branch: "edit", From: c.Repo.R2, Files: map[string][]byte{envFile: edited}, Message: "edit without compile"})
	stale := c.Repo.Git.Merge(gittest.Main, "edit", gittest.Commit{Trailers: []string{"Reviewed-by: Carol <carol@example.com>"}})
	keyring := t.TempDir() + "/trusted.asc"
	if err := os.WriteFile(keyring, []byte(gittest.NewKey(t, "Alice", "alice@example.com").Armored), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name     string
		db       string
		args     []string
		wantCode int
		wantOut  string
		setup    func(t *testing.T)
	}{
		{name: "empty --env", db: url, args: []string{"--env", ""}, wantCode: 2, wantOut: "--env must not be empty"},
		{name: "no database", db: "", args: []string{"--commit", c.Repo.R1.String()}, wantCode: 2, wantOut: "--database is required"},
		{name: "unknown flag", db: url, args: []string{"--bogus"}, wantCode: 2, wantOut: "unknown flag"},
		{name: "second parent of a merge", db: url, args: []string{"--commit", c.Repo.Feature2.String()}, wantCode: 1, wantOut: "not on the first-parent history"},
		{name: "missing trailer", db: url, args: []string{"--commit", c.Repo.R1.String(), "--require-trailer", "Approved-by"}, wantCode: 1, wantOut: `trailer "Approved-by" missing`},
		{name: "unsigned", db: url, args: []string{"--commit", c.Repo.R1.String(), "--require-signed-by", keyring}, wantCode: 1, wantOut: "commit is not signed"},
		{name: "stale manifest", db: url, args: []string{"--commit", stale.String()}, wantCode: 1, wantOut: "stale"},
		{name: "release 1", db: url, args: []string{"--commit", c.Repo.R1.String(), "--require-trailer", "Reviewed-by"}, wantCode: 0, wantOut: "dev release 1 (base 0)"},
		{name: "release 1 again", db: url, args: []string{"--commit", c.Repo.R1.String()}, wantCode: 0, wantOut: "already active (replayed)"},
		{name: "release 2", db: url, args: []string{"--commit", c.Repo.R2.String()}, wantCode: 0, wantOut: "dev release 2 (base 1)"},
		{name: "release 2 again after a rollback to 1", db: url, args: []string{"--commit", c.Repo.R2.String()}, wantCode: 0,
			wantOut: "promoted earlier by this command (replayed) and since rolled back; release 1 is active; nothing moved",
			setup: func(t *testing.T) {
				if _, err := c.Store.Rollback(context.Background(), promoter.RollbackInput{CommandID: promotertest.ID("cli", "rollback"),
					EnvTag: promotertest.Env, ToRelease: 1, Actor: "oncall", Reason: "bad"}); err != nil {
					t.Fatal(err)
				}
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.setup != nil {
				tt.setup(t)
			}
			before := promotertest.ReadState(t, c.Pool)
			c.Registry.Reset()
			code, out := c.run(t, tt.db, tt.args...)
			if code != tt.wantCode || !strings.Contains(out, tt.wantOut) {
				t.Fatalf("got exit %d output %q, want exit %d mentioning %q", code, out, tt.wantCode, tt.wantOut)
			}
			if code != 0 || tt.setup != nil {
				if after := promotertest.ReadState(t, c.Pool); !promotertest.SameCounts(before.Counts, after.Counts) {
					t.Errorf("got rows %v, want unchanged %v", after.Counts, before.Counts)
				}
				if n := c.Registry.Writes(); n != 0 {
					t.Errorf("got %d registry writes, want 0", n)
				}
			}
		})
	}
}

// TestPromoteCLIUnconfirmed cuts the database connection right after a
// COMMIT has been forwarded to PostgreSQL (a real TCP proxy, so the COMMIT
// reaches the server and its reply never reaches configpub): the outcome is
// unknown, `configpub promote` exits 3, and re-running the same promote
// converges without a second effect.
func TestPromoteCLIUnconfirmed(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the configpub binary; skipped under -short")
	}
	for _, cutAt := range []int32{1, 2} {
		t.Run(map[int32]string{1: "first commit", 2: "second commit"}[cutAt], func(t *testing.T) {
			c := newCLIHarness(t)
			direct := c.DB.URLFor(t, "configpub_promoter")
			proxied := proxyURL(t, direct, cutAt)

			code, out := c.run(t, proxied, "--commit", c.Repo.R1.String())
			if code != 3 || !strings.Contains(out, "reconcile") {
				t.Fatalf("got exit %d output %q, want exit 3 asking to re-run or reconcile", code, out)
			}
			s := promotertest.ReadState(t, c.Pool)
			if len(s.Pointers) != 0 && !promotertest.PointersAt(s.Pointers, c.Repo.Snapshots[c.Repo.R1]) {
				t.Fatalf("got pointers %v, want none or all of release 1", s.Pointers)
			}
			promotertest.CheckJournal(t, s)

			code, out = c.run(t, direct, "--commit", c.Repo.R1.String())
			if code != 0 {
				t.Fatalf("re-run: got exit %d output %q, want 0", code, out)
			}
			s = promotertest.ReadState(t, c.Pool)
			if !promotertest.PointersAt(s.Pointers, c.Repo.Snapshots[c.Repo.R1]) {
				t.Fatalf("after the re-run: got pointers %v, want release 1", s.Pointers)
			}
			if got, want := s.Counts["pointer_move"], int64(len(c.Repo.Snapshots[c.Repo.R1])); got != want {
				t.Errorf("got %d pointer moves, want %d (one effect)", got, want)
			}
			promotertest.CheckJournal(t, s)
		})
	}
}

// proxyURL starts a commitCutter in front of the database of dbURL and
// returns dbURL pointing at it.
func proxyURL(t *testing.T, dbURL string, cutAt int32) string {
	t.Helper()
	u, err := url.Parse(dbURL)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &commitCutter{ln: ln, target: u.Host, cutAt: cutAt}
	go p.serve()
	t.Cleanup(p.close)
	u.Host = ln.Addr().String()
	return u.String()
}

// commitCutter is a TCP proxy in front of PostgreSQL (sslmode=disable). It
// forwards everything until the cutAt-th simple-protocol COMMIT across all
// connections: it forwards that COMMIT to the server, drops the client
// connection at once and discards the server's reply, so the transaction
// commits while the client never learns it. A real network fault, not a
// fake store.
type commitCutter struct {
	ln      net.Listener
	target  string
	cutAt   int32
	commits atomic.Int32
	wg      sync.WaitGroup
}

func (p *commitCutter) close() {
	_ = p.ln.Close()
	p.wg.Wait()
}

func (p *commitCutter) serve() {
	for {
		client, err := p.ln.Accept()
		if err != nil {
			return
		}
		server, err := net.Dial("tcp", p.target)
		if err != nil {
			_ = client.Close()
			continue
		}
		p.wg.Add(2)
		var cut atomic.Bool
		go func() { // server -> client, discarding everything once cut
			defer p.wg.Done()
			buf := make([]byte, 32<<10)
			for {
				n, err := server.Read(buf)
				if n > 0 && !cut.Load() {
					if _, werr := client.Write(buf[:n]); werr != nil {
						cut.Store(true)
					}
				}
				if err != nil {
					_ = client.Close()
					return
				}
			}
		}()
		go func() { // client -> server, message by message
			defer p.wg.Done()
			defer server.Close()
			defer client.Close()
			first := true
			for {
				msg, typ, err := readMessage(client, first)
				first = false
				if err != nil {
					return
				}
				// The cut is set before the COMMIT reaches the server, so
				// that its reply can never be forwarded to the client.
				last := typ == 'Q' && isCommit(msg[5:]) && p.commits.Add(1) == p.cutAt
				if last {
					cut.Store(true)
				}
				if _, err := server.Write(msg); err != nil {
					return
				}
				if last {
					_ = client.Close()
					time.Sleep(500 * time.Millisecond) // let the server run the COMMIT
					return
				}
			}
		}()
	}
}

// readMessage reads one frontend message: the untyped startup message
// first, typed messages after it.
func readMessage(r io.Reader, startup bool) (msg []byte, typ byte, err error) {
	hdr := 5
	if startup {
		hdr = 4
	}
	msg = make([]byte, hdr)
	if _, err := io.ReadFull(r, msg); err != nil {
		return nil, 0, err
	}
	l := msg[hdr-4:]
	n := int(l[0])<<24 | int(l[1])<<16 | int(l[2])<<8 | int(l[3])
	if n < 4 || n > 64<<20 {
		return nil, 0, errors.New("bad message length")
	}
	body := make([]byte, n-4)
	if _, err := io.ReadFull(r, body); err != nil {
		return nil, 0, err
	}
	if !startup {
		typ = msg[0]
	}
	return append(msg, body...), typ, nil
}

func isCommit(query []byte) bool {
	q := strings.ToLower(strings.TrimSpace(string(bytes.TrimRight(query, "\x00"))))
	return q == "commit" || q == "commit;" || q == "end"
}
