package promoter_test

import (
	"bytes"
	"context"
	"errors"
	"net"
	"net/url"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/configpub/configpub/promoter"
)

// cutProxy is a real TCP proxy in front of PostgreSQL. When armed it
// forwards the next COMMIT to the server, swallows the server's answer and
// closes the client's socket: the transaction commits, the client never
// learns it.
type cutProxy struct {
	ln     net.Listener
	target string
	armed  atomic.Bool
	cut    atomic.Bool
	wg     sync.WaitGroup
}

func newCutProxy(t *testing.T, target string) *cutProxy {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &cutProxy{ln: ln, target: target}
	p.wg.Add(1)
	go p.serve()
	t.Cleanup(func() { ln.Close(); p.wg.Wait() })
	return p
}

func (p *cutProxy) serve() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		s, err := net.Dial("tcp", p.target)
		if err != nil {
			c.Close()
			continue
		}
		var swallow atomic.Bool // set just before a COMMIT is forwarded
		p.wg.Add(2)
		go func() { // server -> client
			defer p.wg.Done()
			defer c.Close()
			defer s.Close()
			buf := make([]byte, 64<<10)
			for {
				n, err := s.Read(buf)
				if swallow.Load() {
					// The COMMIT's answer (or the end of the session):
					// never relayed; the client's socket is closed.
					return
				}
				if n > 0 {
					if _, werr := c.Write(buf[:n]); werr != nil {
						return
					}
				}
				if err != nil {
					return
				}
			}
		}()
		go func() { // client -> server, watching for COMMIT
			defer p.wg.Done()
			buf := make([]byte, 64<<10)
			commit := []byte("commit\x00")
			for {
				n, err := c.Read(buf)
				if n > 0 {
					if p.armed.Load() && n > 5 && buf[0] == 'Q' && bytes.Contains(buf[:n], commit) {
						p.armed.Store(false)
						p.cut.Store(true)
						swallow.Store(true)
					}
					if _, werr := s.Write(buf[:n]); werr != nil {
						s.Close()
						return
					}
				}
				if err != nil {
					s.Close()
					return
				}
			}
		}()
	}
}

func TestCommitAppliedButReplyLostIsUnconfirmedThenReplayed(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	ctx := context.Background()
	r1 := release("prod", 1, 0, 3, nil, nil)
	f.promote(t, r1)

	u, err := url.Parse(f.db.URL)
	if err != nil {
		t.Fatal(err)
	}
	proxy := newCutProxy(t, u.Host)
	u.Host = proxy.ln.Addr().String()
	pool, err := pgxpool.New(ctx, u.String())
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	commits := 0
	opts := promoter.Options{Signer: f.key, Clock: func() time.Time { return f.now }}
	promoter.SetFaultInjector(&opts, func(_ context.Context, step string, _ pgx.Tx) error {
		if step == "commit" {
			if commits++; commits == 2 { // the activation's COMMIT
				proxy.armed.Store(true)
			}
		}
		return nil
	})
	s, err := promoter.Open(ctx, pool, opts)
	if err != nil {
		t.Fatal(err)
	}
	r2 := release("prod", 2, 1, 3, nil, nil)
	_, err = s.RecordAndActivate(ctx, r2)
	if !errors.Is(err, promoter.ErrUnconfirmed) {
		t.Fatalf("got %v, want ErrUnconfirmed", err)
	}
	if !proxy.cut.Load() {
		t.Fatal("the proxy never cut a COMMIT")
	}
	// The activation did commit: the store says so, and nothing is guessed.
	f.wantPointersAt(t, r2)
	rec, err := f.store.Reconcile(ctx, "prod")
	if err != nil || len(rec.Settled) != 0 || rec.CurrentRelease != 2 {
		t.Fatalf("got %+v %v, want nothing to settle at release 2", rec, err)
	}
	res := f.promote(t, r2)
	if !res.Replayed || res.Moved != 3 {
		t.Fatalf("re-run got %+v, want the recorded result replayed", res)
	}
	if n := f.count(t, "SELECT count(*) FROM configpub.pointer_move WHERE release_version = 2"); n != 3 {
		t.Fatalf("got %d pointer moves of release 2, want 3 (no second effect)", n)
	}
	f.checkJournal(t)
}
