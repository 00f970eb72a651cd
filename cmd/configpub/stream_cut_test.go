package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/configpub/configpub/internal/pgtest"
	"github.com/configpub/configpub/promoter"
)

// cutProxy relays TCP connections to a PostgreSQL server and, once it has
// relayed limit bytes from the server in one run (0: never), closes every
// connection: the database connection lost in the middle of a reply, as a
// network cut or a server restart loses it.
type cutProxy struct {
	ln     net.Listener
	target string
	limit  atomic.Int64
	sent   atomic.Int64
	mu     sync.Mutex
	conns  []net.Conn
}

func newCutProxy(t *testing.T, target string) *cutProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &cutProxy{ln: ln, target: target}
	t.Cleanup(func() { ln.Close(); p.cut() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s, err := net.Dial("tcp", target)
			if err != nil {
				c.Close()
				continue
			}
			p.mu.Lock()
			p.conns = append(p.conns, c, s)
			p.mu.Unlock()
			go func() { _, _ = io.Copy(s, c); s.Close() }()
			go p.relay(c, s)
		}
	}()
	return p
}

// relay copies the server's bytes to the client, cutting every connection
// once the run's limit is reached.
func (p *cutProxy) relay(client, server net.Conn) {
	defer client.Close()
	buf := make([]byte, 512)
	for {
		n, err := server.Read(buf)
		if n > 0 {
			if limit := p.limit.Load(); limit > 0 && p.sent.Load()+int64(n) >= limit {
				p.cut()
				return
			}
			p.sent.Add(int64(n))
			if _, werr := client.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

func (p *cutProxy) cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conns {
		c.Close()
	}
	p.conns = nil
}

// runSplit runs the CLI with stdout and stderr apart.
func runSplit(args ...string) (stdout, stderr string, code int) {
	root := newRootCmd()
	var out, errOut bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&errOut)
	root.SetArgs(args)
	err := root.ExecuteContext(context.Background())
	if err != nil {
		errOut.WriteString("error: " + err.Error())
	}
	return out.String(), errOut.String(), exitCode(err)
}

// TestJSONStreamCutMidwayPrintsNoPartialDocument: status -o json and
// history -o json stream what they read; a database connection lost in
// the middle of the targets (a real TCP connection cut through a relay,
// after 60% of the bytes a whole run reads) left the first 4 KB of the
// document on stdout with exit 1. An output that fits the 1 MiB buffer is
// now printed whole or not at all: nothing on stdout, the error on
// stderr, exit 1.
func TestJSONStreamCutMidwayPrintsNoPartialDocument(t *testing.T) {
	db := pgtest.New(t)
	_, signer := testKey(t)
	ctx := context.Background()
	store, err := promoter.Open(ctx, db.Pool(t), promoter.Options{Signer: signer})
	if err != nil {
		t.Fatal(err)
	}
	// 60 targets: a status document of about 60 KB, past bufio's 4 KB.
	validFrom := time.Now().UTC().Add(-time.Hour).Truncate(time.Second)
	in := promoter.ReleaseInput{CommandID: uuid.NewString(), EnvTag: "prod", ReleaseVersion: 1, ManifestBytes: []byte("release 1"),
		Actor: "alice", Reason: "release 1", SourcesDigest: "sha256:" + strings.Repeat("5", 64)}
	for i := range 60 {
		values := []byte(fmt.Sprintf("host: host-%02d\n", i))
		in.Targets = append(in.Targets, promoter.Target{
			Host: fmt.Sprintf("host-%02d", i), ServiceID: "svc", EnvTag: "prod", Audience: "gateway",
			SnapshotID: uuid.NewString(), PublicationID: uuid.NewSHA1(uuid.NameSpaceURL, []byte("pub")).String(),
			PolicySnapshotID: uuid.NewString(), ReleaseVersion: 1, PolicyVersion: 1,
			PolicyDigest: sum([]byte(fmt.Sprint("p", i))), ContentDigest: sum([]byte(fmt.Sprint("c", i))),
			PropertySetDigest: sum([]byte("ps")), ArtifactDigest: sum(values), Values: values,
			CreatedAt: validFrom, ValidFrom: validFrom, ExpiresAt: validFrom.Add(25 * time.Hour),
			Lease: promoter.LeaseWindow{RefreshAfter: time.Minute, ExpiresAfter: time.Hour},
		})
	}
	if _, err := store.RecordAndActivate(ctx, in); err != nil {
		t.Fatal(err)
	}
	u, err := url.Parse(db.URL)
	if err != nil {
		t.Fatal(err)
	}
	proxy := newCutProxy(t, u.Host)
	u.Host = proxy.ln.Addr().String()
	d := "--database=" + u.String()

	for _, args := range [][]string{{"status", "--env", "prod", "--output", "json"}, {"history", "--env", "prod", "--output", "json"}} {
		args = append(args, d)
		proxy.limit.Store(0)
		proxy.sent.Store(0)
		whole, stderr, code := runSplit(args...)
		if code != 0 || !json.Valid([]byte(whole)) || len(whole) < 16<<10 {
			t.Fatalf("%s: exit %d, %d bytes (valid JSON %v)\n%s\n%.300s", args[0], code, len(whole), json.Valid([]byte(whole)), stderr, whole)
		}
		total := proxy.sent.Load()
		proxy.limit.Store(total * 6 / 10)
		proxy.sent.Store(0)
		out, stderr, code := runSplit(args...)
		if code == 0 {
			t.Errorf("%s with the connection cut after %d of %d bytes: exit 0\n%s", args[0], total*6/10, total, stderr)
		}
		if out != "" {
			t.Errorf("%s with the connection cut: %d bytes of a %d-byte document on stdout (valid JSON %v), want none:\n%.200s…",
				args[0], len(out), len(whole), json.Valid([]byte(out)), out)
		}
		if !strings.Contains(stderr, "error: ") {
			t.Errorf("%s with the connection cut: stderr names no error: %q", args[0], stderr)
		}
	}
}
