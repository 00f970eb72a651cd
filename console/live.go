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

// journalChannel is the channel the schema's trigger NOTIFYs release-journal
// inserts on, with a payload that names the environment as a pointer note
// does ({"envTag": ...}).
const journalChannel = "configpub_console"

// Channels the console LISTENs on: pointer moves and revocations (the
// promoter's) and release-journal inserts.
var listenChannels = []string{pointernote.Channel, journalChannel}

// hub fans environment-change notices out to server-sent-event clients.
type hub struct {
	mu   sync.Mutex
	subs map[chan string]struct{}
}

func newHub() *hub { return &hub{subs: map[chan string]struct{}{}} }

func (h *hub) subscribe() chan string {
	ch := make(chan string, 16)
	h.mu.Lock()
	h.subs[ch] = struct{}{}
	h.mu.Unlock()
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
// forwards them to the live clients. It returns nil when ctx ends.
func (c *Console) Run(ctx context.Context) error {
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
