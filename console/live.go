package console

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/configpub/configpub/internal/pointernote"
)

// Channels the console LISTENs on: pointer moves and revocations (the
// promoter's), and release-journal inserts (the schema's trigger) and new
// receipts (readback's).
var listenChannels = []string{pointernote.Channel, pointernote.ConsoleChannel}

// hub fans environment-change notices out to server-sent-event clients.
type hub struct {
	mu   sync.Mutex
	subs map[chan string]struct{}
	// onSubscribe, when set, runs after a client subscribed.
	onSubscribe func()
}

func newHub() *hub { return &hub{subs: map[chan string]struct{}{}} }

func (h *hub) subscribe() chan string {
	ch := make(chan string, 16)
	h.mu.Lock()
	h.subs[ch] = struct{}{}
	h.mu.Unlock()
	if h.onSubscribe != nil {
		h.onSubscribe()
	}
	return ch
}

func (h *hub) unsubscribe(ch chan string) {
	h.mu.Lock()
	delete(h.subs, ch)
	h.mu.Unlock()
}

func (h *hub) clients() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.subs)
}

// publish tells every client env changed ("" = unknown: everything); a
// client whose buffer is full already has a notice pending and is skipped.
func (h *hub) publish(env string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for ch := range h.subs {
		select {
		case ch <- env:
		default:
		}
	}
}

// Run LISTENs for changes until ctx ends, reconnecting with back-off, and
// forwards them to the live clients, with the moments leases pass a point
// the pages show, which no notification announces. It returns nil when
// ctx ends.
func (c *Console) Run(ctx context.Context) error {
	var wg sync.WaitGroup
	defer wg.Wait()
	wg.Go(func() { c.followLeases(ctx) })
	delay := 100 * time.Millisecond
	for {
		err := c.listen(ctx, func() { delay = 100 * time.Millisecond })
		if ctx.Err() != nil {
			return nil
		}
		c.opts.Logger.Warn("console: live updates lost the database; retrying", "err", err)
		c.pc.invalidate()
		c.hub.publish("") // clients refresh once the page can be read again
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(delay):
		}
		delay = min(2*delay, 10*time.Second)
	}
}

func (c *Console) listen(ctx context.Context, connected func()) error {
	conn, err := c.pool.Acquire(ctx)
	if err != nil {
		return fmt.Errorf("acquire: %w", err)
	}
	// A LISTEN connection is not given back to the pool.
	pc := conn.Hijack()
	defer pc.Close(context.WithoutCancel(ctx))
	for _, ch := range listenChannels {
		if _, err := pc.Exec(ctx, "LISTEN "+ch); err != nil {
			return fmt.Errorf("listen %s: %w", ch, err)
		}
	}
	connected()
	for {
		wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		n, err := pc.WaitForNotification(wctx)
		cancel()
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			if wctx.Err() != nil { // idle: probe the connection
				if _, err := pc.Exec(ctx, "SELECT 1"); err != nil {
					return fmt.Errorf("heartbeat: %w", err)
				}
				continue
			}
			return fmt.Errorf("wait: %w", err)
		}
		var p pointernote.Note
		if json.Unmarshal([]byte(n.Payload), &p) != nil || p.Revoked {
			p.EnvTag = ""
		}
		c.pc.invalidate()
		c.hub.publish(p.EnvTag)
		c.poke()
	}
}

// poke wakes followLeases without blocking; a wake already pending
// covers this one.
func (c *Console) poke() {
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// followLeases tells the live clients of an environment when one of its
// leases passes its refresh point, its end, or the start of the lease
// horizon before its end: the overview and target pages change then
// (LEASE_EXPIRED, leases about to expire) without any notification — a
// page watched during an incident kept showing APPLIED after the lease had
// ended. It reads the next such moment of every environment when a
// notification or a new client wakes it, only while clients are
// connected, and otherwise looks at the clock at least every leaseCheck
// (the clock may be injected). It returns when ctx ends.
func (c *Console) followLeases(ctx context.Context) {
	var due map[string]time.Time // nil: to be read
	for {
		wait := c.leaseCheck
		if c.hub.clients() > 0 {
			now := c.opts.Now()
			if due == nil {
				var err error
				if due, err = c.rd.LeaseMoments(ctx, now); err != nil {
					if ctx.Err() != nil {
						return
					}
					c.opts.Logger.Warn("console: read lease moments", "err", err)
					due = nil
				}
			}
			passed := false
			for env, t := range due {
				if t.After(now) {
					wait = min(wait, t.Sub(now))
					continue
				}
				passed = true
				delete(due, env)
				c.pc.invalidate()
				c.hub.publish(env)
			}
			if passed {
				due = nil // read the next moments
				continue
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-c.wake:
			due = nil
			select { // let a burst settle: one read for an activation's notifications
			case <-ctx.Done():
				return
			case <-time.After(c.leaseSettle):
			}
		case <-time.After(wait):
		}
	}
}

// events streams change notices as server-sent events: one "change" event
// with the environment tag (empty: any) per notice, batched over 150 ms.
func (c *Console) events(w http.ResponseWriter, r *http.Request) {
	fl, ok := w.(http.Flusher)
	if !ok {
		writeError(w, r, http.StatusInternalServerError, "streaming unsupported")
		return
	}
	env := r.URL.Query().Get("env")
	ch := c.hub.subscribe()
	defer c.hub.unsubscribe(ch)
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	fmt.Fprint(w, "retry: 1000\n: connected\n\n")
	fl.Flush()
	ping := time.NewTicker(15 * time.Second)
	defer ping.Stop()
	for {
		select {
		case <-r.Context().Done():
			return
		case <-ping.C:
			fmt.Fprint(w, ": ping\n\n")
			fl.Flush()
		case got := <-ch:
			// Batch a burst (one activation NOTIFYs per target).
			changed := map[string]bool{got: true}
			timer := time.NewTimer(150 * time.Millisecond)
		drain:
			for {
				select {
				case more := <-ch:
					changed[more] = true
				case <-timer.C:
					break drain
				}
			}
			if changed[""] {
				changed = map[string]bool{"": true}
			}
			for e := range changed {
				if env != "" && e != "" && e != env {
					continue
				}
				b, _ := json.Marshal(map[string]string{"envTag": e})
				fmt.Fprintf(w, "event: change\ndata: %s\n\n", b)
			}
			fl.Flush()
		}
	}
}
