package configserver

import (
	"bytes"
	"context"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/configpub/configpub/bundle"
	"github.com/configpub/configpub/configserver/auth"
)

// parked is a held watch request whose connection the handler took over:
// no goroutine runs for it until its identity changes, its wait ends or the
// server shuts down.
type parked struct {
	h      *handler
	conn   net.Conn
	hdr    http.Header // the response headers set so far
	r      *http.Request
	rl     *reqLog
	sw     *statusWriter
	claims *auth.Claims
	id     bundle.Identity
	first  *Delivery // what the wait started with

	mu     sync.Mutex
	done   bool
	timer  *time.Timer
	cancel func() bool // the current change subscription
}

// park registers p until its identity changes or wait ends.
func (h *handler) park(p *parked, wait time.Duration) {
	p.rl.parked = true
	h.metrics.watchers.Inc()
	h.parkedMu.Lock()
	h.parkedSet[p] = struct{}{}
	h.parkedMu.Unlock()
	p.mu.Lock()
	p.timer = time.AfterFunc(wait, func() { p.end("") })
	p.mu.Unlock()
	if h.stopped() { // shutdown began after the handler checked
		p.end("server shutting down")
		return
	}
	p.recheck()
}

// onChange is p's change subscription: it must not block.
func (p *parked) onChange() { go p.recheck() }

// recheck subscribes to the next change, then answers if the identity's
// answer already differs from the one the wait started with.
func (p *parked) recheck() {
	p.mu.Lock()
	if p.done {
		p.mu.Unlock()
		return
	}
	p.cancel = p.h.notifier.Subscribe(p.id, p.onChange)
	p.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), p.h.storeTimeout)
	d, err := p.h.store.Current(ctx, p.id)
	cancel()
	if err == nil && sameAnswer(p.r, p.first, d) {
		return // a spurious wake-up: keep waiting
	}
	p.answer(d, err, "")
}

// end answers p with whatever is current: its wait ran out, or the server
// is shutting down (reason).
func (p *parked) end(reason string) {
	ctx, cancel := context.WithTimeout(context.Background(), p.h.storeTimeout)
	d, err := p.h.store.Current(ctx, p.id)
	cancel()
	p.answer(d, err, reason)
}

// answer writes p's response (once), closes the connection and logs it.
func (p *parked) answer(d *Delivery, err error, reason string) {
	p.mu.Lock()
	if p.done {
		p.mu.Unlock()
		return
	}
	p.done = true
	p.timer.Stop()
	if p.cancel != nil {
		p.cancel()
	}
	p.mu.Unlock()
	h := p.h
	h.parkedMu.Lock()
	delete(h.parkedSet, p)
	h.parkedMu.Unlock()
	h.metrics.watchers.Dec()

	cw := &connWriter{hdr: p.hdr}
	p.sw.ResponseWriter = cw
	if reason != "" {
		p.rl.reason = reason
	}
	var herr *httpError
	if err != nil {
		herr = storeError(err)
	} else {
		herr = h.writeDelivery(p.sw, p.r, p.rl, p.claims, d)
	}
	if herr != nil {
		h.writeError(p.sw, p.rl, herr)
	}
	cw.writeTo(p.conn)
	h.finishRequest(p.r, p.rl, p.sw)
}

// connWriter collects a response for a taken-over connection and writes
// it as HTTP/1.1 with "Connection: close".
type connWriter struct {
	hdr    http.Header
	status int
	body   []byte
}

func (w *connWriter) Header() http.Header { return w.hdr }

func (w *connWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
}

func (w *connWriter) Write(b []byte) (int, error) {
	w.WriteHeader(http.StatusOK)
	w.body = append(w.body, b...)
	return len(b), nil
}

// writeTo sends the response on conn and closes it; a client that left
// is not an error.
func (w *connWriter) writeTo(conn net.Conn) {
	var buf bytes.Buffer
	buf.WriteString("HTTP/1.1 " + strconv.Itoa(w.status) + " " + http.StatusText(w.status) + "\r\n")
	w.hdr["Date"] = []string{time.Now().UTC().Format(http.TimeFormat)}
	w.hdr["Connection"] = []string{"close"}
	_ = w.hdr.Write(&buf)
	buf.WriteString("\r\n")
	buf.Write(w.body)
	_ = conn.SetWriteDeadline(time.Now().Add(watchSlack))
	_, _ = conn.Write(buf.Bytes())
	_ = conn.Close()
}
