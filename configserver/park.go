package configserver

import (
	"context"
	"encoding/base64"
	"net"
	"net/http"
	"runtime"
	"slices"
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
	// firstErr is the absence (ErrNotFound, ErrGone) the wait started
	// with when first is nil.
	firstErr error

	mu     sync.Mutex
	done   bool
	timer  *time.Timer
	cancel func() bool // the current change subscription
}

// park registers p until its identity changes or wait ends.
func (h *handler) park(p *parked, wait time.Duration) {
	h.register(p)
	h.arm(p, wait)
	if h.stopped() { // shutdown began after the handler checked
		p.end("server shutting down")
		return
	}
	p.recheck()
}

// register makes p known to EndWatches and endGone: from here on it may be
// answered at any time, before its timer is set too.
func (h *handler) register(p *parked) {
	p.rl.parked = true
	h.metrics.watchers.Inc()
	h.parkedMu.Lock()
	h.parkedSet[p] = struct{}{}
	h.parkedBy[p.id] = append(h.parkedBy[p.id], p)
	h.unanswered++
	h.parkedMu.Unlock()
}

// arm sets p's timer to end its wait, unless p was answered already.
func (h *handler) arm(p *parked, wait time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.done {
		p.timer = time.AfterFunc(wait, func() { p.end("") })
	}
}

// onChange is p's change subscription: it must not block. The notifier
// dropped the subscription when it called it; p joins the wake queue.
func (p *parked) onChange() { p.h.wakes.push(p) }

// wakeQueue answers woken parked requests on at most 2 x GOMAXPROCS
// worker goroutines (two per CPU, so that an artifact read from the
// database does not idle a CPU), oldest first: a move that wakes thousands
// of waiters costs a few goroutines, not one each, and the first woken are
// answered first.
type wakeQueue struct {
	mu      sync.Mutex
	queue   []*parked
	workers int
}

func (q *wakeQueue) push(p *parked) {
	q.mu.Lock()
	q.queue = append(q.queue, p)
	start := q.workers < 2*runtime.GOMAXPROCS(0)
	if start {
		q.workers++
	}
	q.mu.Unlock()
	if start {
		go q.work()
	}
}

// work answers queued requests until the queue is empty.
func (q *wakeQueue) work() {
	for {
		q.mu.Lock()
		if len(q.queue) == 0 {
			q.queue = nil // let a large burst's backing array go
			q.workers--
			q.mu.Unlock()
			return
		}
		p := q.queue[0]
		q.queue[0] = nil
		q.queue = q.queue[1:]
		q.mu.Unlock()
		p.wake()
	}
}

// wake answers p with its identity's new answer. Only when the answer is
// still the one the wait started with (a spurious wake-up) does it
// subscribe again.
func (p *parked) wake() {
	p.mu.Lock()
	if p.done {
		p.mu.Unlock()
		return
	}
	p.cancel = nil
	p.mu.Unlock()
	d, err := p.current()
	if unchanged(p.r, p.first, p.firstErr, d, err) {
		p.recheck()
		return
	}
	p.answer(d, err, "")
}

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
	d, err := p.current()
	if unchanged(p.r, p.first, p.firstErr, d, err) {
		return // keep waiting
	}
	p.answer(d, err, "")
}

// current reads p's identity from the store.
func (p *parked) current() (*Delivery, error) {
	ctx, cancel := context.WithTimeout(context.Background(), p.h.storeTimeout)
	defer cancel()
	return p.h.current(ctx, p.id)
}

// end answers p with whatever is current: its wait ran out, or the server
// is shutting down (reason).
func (p *parked) end(reason string) {
	d, err := p.current()
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
	if p.timer != nil { // nil when answered between register and arm
		p.timer.Stop()
	}
	if p.cancel != nil {
		p.cancel()
	}
	p.mu.Unlock()
	h := p.h
	h.parkedMu.Lock()
	delete(h.parkedSet, p)
	if by := slices.DeleteFunc(h.parkedBy[p.id], func(q *parked) bool { return q == p }); len(by) > 0 {
		h.parkedBy[p.id] = by
	} else {
		delete(h.parkedBy, p.id)
	}
	h.parkedMu.Unlock()
	h.release(p.id)
	h.metrics.watchers.Dec()
	if reason != "" {
		p.rl.reason = reason
	}

	bp := wireBufs.Get().(*[]byte)
	buf := (*bp)[:0]
	var body []byte
	refused := h.stillTrusted(p.claims)
	if refused == nil && err == nil && d.hv != nil && d.Identity == p.claims.Identity() && d.Audience == p.claims.ConfigAudience {
		buf, body = p.wireDelivery(buf, d)
	} else {
		buf, body = p.wireSlow(buf, d, err, refused)
	}
	_ = p.conn.SetWriteDeadline(time.Now().Add(watchSlack))
	if len(body) > 0 {
		bufs := net.Buffers{buf, body}
		_, _ = bufs.WriteTo(p.conn)
	} else {
		_, _ = p.conn.Write(buf)
	}
	_ = p.conn.Close()
	if cap(buf) <= maxWireBuf {
		*bp = buf
		wireBufs.Put(bp)
	}
	h.finishRequest(p.r, p.rl, p.sw)
	if h.watchAnswered != nil {
		h.watchAnswered(p.sw.status, time.Now())
	}
	h.parkedMu.Lock()
	h.unanswered--
	h.parkedMu.Unlock()
}

// wireBufs holds response header buffers of parked answers.
var wireBufs = sync.Pool{New: func() any { b := make([]byte, 0, 4096); return &b }}

// maxWireBuf is the largest buffer wireBufs keeps.
const maxWireBuf = 64 << 10

// wireDelivery renders the 200 or 304 answer of a delivery the claims may
// read: what writeDelivery writes, from the delivery's prebuilt header
// lines. It returns the header bytes and the body to send after them.
func (p *parked) wireDelivery(buf []byte, d *Delivery) ([]byte, []byte) {
	hv := d.hv
	status := http.StatusOK
	if ifNoneMatch(p.r.Header["If-None-Match"], hv.vals[hvETag]) {
		status = http.StatusNotModified
		p.rl.notModified = true
	}
	p.rl.snapshotID = d.SnapshotID
	p.sw.status = status
	buf = p.appendHead(buf, status)
	buf = hv.appendWire(buf)
	if len(d.Manifest) > 0 {
		buf = append(buf, bundle.HeaderManifest+": "...)
		buf = base64.RawURLEncoding.AppendEncode(buf, d.Manifest)
		buf = append(buf, "\r\n"...)
	}
	var body []byte
	if status == http.StatusOK {
		buf = append(buf, "Content-Type: "+contentTypeYAML[0]+"\r\nContent-Length: "...)
		buf = strconv.AppendInt(buf, int64(len(d.Body)), 10)
		buf = append(buf, "\r\n"...)
		if p.r.Method != http.MethodHead {
			body = d.Body
			p.sw.size = len(body)
		}
	}
	return append(buf, "\r\n"...), body
}

// wireSlow renders any other answer (refused, an error, or a delivery
// without prebuilt header lines) through writeDelivery and writeError.
func (p *parked) wireSlow(buf []byte, d *Delivery, err error, refused *httpError) ([]byte, []byte) {
	cw := &connWriter{hdr: p.hdr}
	p.sw.ResponseWriter = cw
	herr := refused
	switch {
	case herr != nil:
	case err != nil:
		herr = storeError(err)
	default:
		herr = p.h.writeDelivery(p.sw, p.r, p.rl, p.claims, d)
	}
	if herr != nil {
		p.h.writeError(p.sw, p.rl, herr)
	}
	if cw.status == 0 {
		cw.status = http.StatusOK
	}
	delete(cw.hdr, "Date")
	delete(cw.hdr, "Connection")
	buf = p.appendHead(buf, cw.status) // with every header writeDelivery or writeError set
	return append(buf, "\r\n"...), cw.body
}

// appendHead appends the status line, the headers set before the request
// was parked, Date and "Connection: close".
func (p *parked) appendHead(buf []byte, status int) []byte {
	buf = append(buf, "HTTP/1.1 "...)
	buf = strconv.AppendInt(buf, int64(status), 10)
	buf = append(buf, ' ')
	buf = append(buf, http.StatusText(status)...)
	buf = append(buf, "\r\n"...)
	for k, vs := range p.hdr {
		buf = appendHeader(buf, k, vs)
	}
	buf = append(buf, "Date: "...)
	buf = p.h.now().UTC().AppendFormat(buf, http.TimeFormat)
	return append(buf, "\r\nConnection: close\r\n"...)
}

// appendHeader appends one header's lines, cleaned as net/http cleans them.
func appendHeader(buf []byte, k string, vs []string) []byte {
	for _, v := range vs {
		buf = append(buf, k...)
		buf = append(buf, ": "...)
		buf = append(buf, cleanHeaderValue(v)...)
		buf = append(buf, "\r\n"...)
	}
	return buf
}

// connWriter collects a response for a taken-over connection.
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
