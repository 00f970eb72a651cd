package configserver

import (
	"bytes"
	"errors"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/configpub/configpub/bundle"
	"github.com/configpub/configpub/configserver/auth"
)

// DefaultMaxWait bounds wait= when Options.MaxWait is 0.
const DefaultMaxWait = 5 * time.Minute

// DefaultMaxWatchesPerIdentity is Options.MaxWatchesPerIdentity's default.
const DefaultMaxWatchesPerIdentity = 8

// hold takes one of id's held-request slots, false when id holds its
// limit already; release gives it back.
func (h *handler) hold(id bundle.Identity) bool {
	h.parkedMu.Lock()
	defer h.parkedMu.Unlock()
	if h.holding[id] >= h.maxHolding {
		return false
	}
	h.holding[id]++
	return true
}

func (h *handler) release(id bundle.Identity) {
	h.parkedMu.Lock()
	defer h.parkedMu.Unlock()
	if h.holding[id]--; h.holding[id] <= 0 {
		delete(h.holding, id)
	}
}

// endGone answers id's parked requests whose clients have closed their
// connections, so that their slots are free, and returns how many it
// answered. A parked connection is not read while it waits (no goroutine
// runs for it), so a client that went away is found only by asking: when
// its identity asks for more than its limit — a runtime restarting in a
// loop, or one token opening and dropping connections — rather than on
// every request.
func (h *handler) endGone(id bundle.Identity) int {
	h.parkedMu.Lock()
	ps := slices.Clone(h.parkedBy[id])
	h.parkedMu.Unlock()
	n := 0
	for _, p := range ps {
		if peerGone(p.conn) {
			p.end("client gone")
			n++
		}
	}
	return n
}

// errTooManyWatches answers a request to hold beyond the identity's limit.
func errTooManyWatches(limit int) *httpError {
	return &httpError{status: http.StatusTooManyRequests, code: "too_many_requests",
		message: "this identity holds " + strconv.Itoa(limit) + " requests already; retry after 1 s",
		reason:  "held requests limit", retryAfter: 1}
}

// watchSlack is added to a held request's read and write deadlines beyond
// its wait, so that the server's own timeouts never cut a watch short.
const watchSlack = 10 * time.Second

// requestedWait returns the wait= of a /configs query: a Go duration
// ("30s", "5m") or whole seconds ("30"); 0 when absent. A value above max is
// lowered to max; a negative or unreadable one is a 400.
func requestedWait(rawQuery string, max time.Duration) (time.Duration, *httpError) {
	vals := queryValues(rawQuery, "wait")
	switch len(vals) {
	case 0:
		return 0, nil
	case 1:
	default:
		return 0, errBadRequest("query parameter wait given more than once")
	}
	raw := vals[0]
	var d time.Duration
	if n, err := strconv.ParseInt(raw, 10, 64); isWholeSeconds(raw) && (err == nil || errors.Is(err, strconv.ErrRange)) {
		// Whole seconds, however many digits: beyond int64 n is clamped
		// to its sign's bound, and above max the wait is max.
		switch {
		case n < 0:
			return 0, errBadRequest("query parameter wait is negative")
		case n < int64(max/time.Second):
			d = time.Duration(n) * time.Second
		default:
			d = max
		}
	} else if d, err = time.ParseDuration(raw); err != nil {
		return 0, errBadRequest("query parameter wait is not a duration (30s, 5m or whole seconds)")
	}
	if d < 0 {
		return 0, errBadRequest("query parameter wait is negative")
	}
	return min(d, max), nil
}

// isWholeSeconds reports whether s is a count of whole seconds: an
// optional sign and decimal digits (strconv.ParseInt reports an overflow
// before it reads the rest: 18700000000000000000A is out of range to it).
func isWholeSeconds(s string) bool {
	if s != "" && (s[0] == '+' || s[0] == '-') {
		s = s[1:]
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return s != ""
}

// watchCurrent answers a GET /configs?wait= whose If-None-Match names the
// current ETag by holding it until the identity's answer changes, the wait
// ends or the server shuts down. It reads the store's memory only: the
// wake-up comes from the store's change subscription. A moved pointer
// answers 200; a renewed lease (same bytes, a new signed manifest) answers
// 304 with the new manifest headers; a retirement, revocation or outage
// answers as a plain GET would (410, 404, 503). The end of the wait or of
// the server answers 304 with the current headers. When d is nil the
// identity had no snapshot to serve (firstErr: ErrNotFound or ErrGone) and
// the request is held until that changes, answered as a plain GET would
// then; the end of the wait answers the 404 or 410 again.
//
// Over HTTP/1.x the request is parked: the handler takes the connection
// over, net/http's goroutines and buffers for it are released, and the
// held request costs a few hundred bytes of state, a timer and a
// subscription until it is answered, on a fresh goroutine, with
// "Connection: close". Where the connection cannot be taken over (HTTP/2,
// a test recorder) the handler's goroutine waits instead.
func (h *handler) watchCurrent(w http.ResponseWriter, r *http.Request, rl *reqLog, c *auth.Claims, id bundle.Identity, d *Delivery, firstErr error, wait time.Duration) *httpError {
	// A held request never outlives its token: the answer it ends with is
	// given while the token is valid.
	if !c.Expiry.IsZero() {
		if left := c.Expiry.Sub(h.now()); left < wait {
			wait = left
		}
		if wait <= 0 {
			if d == nil {
				return storeError(firstErr)
			}
			return h.writeDelivery(w, r, rl, c, d)
		}
	}
	if !h.hold(id) && (h.endGone(id) == 0 || !h.hold(id)) {
		return errTooManyWatches(h.maxHolding)
	}
	sw, _ := w.(*statusWriter)
	if sw != nil && !h.stopped() {
		hdr := w.Header()
		conn, _, err := http.NewResponseController(w).Hijack()
		if err == nil {
			// Keep only what the answer needs: nothing that refers to
			// net/http's connection state or buffers.
			slim := &http.Request{Method: r.Method, RemoteAddr: r.RemoteAddr,
				Header: http.Header{"If-None-Match": r.Header["If-None-Match"]}}
			sw.ResponseWriter = nil
			h.park(&parked{h: h, conn: conn, hdr: hdr, r: slim, rl: rl, sw: sw, claims: c, id: id, first: d, firstErr: firstErr}, wait)
			return nil
		}
	}
	defer h.release(id)
	return h.waitInline(w, r, rl, c, id, d, firstErr, wait)
}

// waitInline holds the request on the handler's goroutine.
func (h *handler) waitInline(w http.ResponseWriter, r *http.Request, rl *reqLog, c *auth.Claims, id bundle.Identity, first *Delivery, firstErr error, wait time.Duration) *httpError {
	deadline := time.Now().Add(wait)
	rc := http.NewResponseController(w)
	_ = rc.SetReadDeadline(deadline.Add(watchSlack)) // an unsupported writer has no deadline to lift
	_ = rc.SetWriteDeadline(deadline.Add(watchSlack))
	timer := time.NewTimer(wait)
	defer timer.Stop()
	h.metrics.watchers.Inc()
	defer h.metrics.watchers.Dec()
	for {
		changed := make(chan struct{})
		cancel := h.notifier.Subscribe(id, func() { close(changed) })
		// Read again once subscribed, the first time too: a change between
		// the handler's read and the subscription wakes no one.
		d, err := h.current(r.Context(), id)
		if !unchanged(r, first, firstErr, d, err) {
			cancel()
			return h.answerInline(w, r, rl, c, d, err) // moved (200), renewed (304, new manifest) or gone
		}
		select {
		case <-changed:
			continue // re-read; a spurious wake-up waits again
		case <-timer.C:
		case <-h.stopWatches:
			rl.reason = "server shutting down"
		case <-r.Context().Done():
			rl.reason = "client gone"
		}
		cancel()
		return h.answerInline(w, r, rl, c, d, err)
	}
}

// answerInline answers a request held on the handler's goroutine with the
// identity's answer (d, err), as a plain GET would.
func (h *handler) answerInline(w http.ResponseWriter, r *http.Request, rl *reqLog, c *auth.Claims, d *Delivery, err error) *httpError {
	if herr := h.stillTrusted(c); herr != nil {
		return herr
	}
	// Read before the wait: the lease may have ended while it was held.
	if d, err = h.unexpired(d, err); err != nil {
		return storeError(err)
	}
	return h.writeDelivery(w, r, rl, c, d)
}

// sameAnswer reports whether d still matches the request's If-None-Match
// with the manifest of the delivery the wait started with.
func sameAnswer(r *http.Request, first, d *Delivery) bool {
	return ifNoneMatch(r.Header["If-None-Match"], etagOf(d)) && bytes.Equal(d.Manifest, first.Manifest)
}

// unchanged reports whether the identity's answer (d, err) is still the
// one a wait started with: first, or, when first is nil, the same absence
// as firstErr (no current snapshot, or retired).
func unchanged(r *http.Request, first *Delivery, firstErr error, d *Delivery, err error) bool {
	if first == nil {
		a := absence(err)
		return a != nil && a == absence(firstErr)
	}
	return err == nil && sameAnswer(r, first, d)
}

// absence returns ErrNotFound or ErrGone when err is one of them (the
// identity has no snapshot to serve), else nil.
func absence(err error) error {
	switch {
	case errors.Is(err, ErrNotFound):
		return ErrNotFound
	case errors.Is(err, ErrGone):
		return ErrGone
	}
	return nil
}

// queryValues returns the values of key in a raw query, keys and values
// decoded as requestedIdentity decodes them (w%61it=3%30s is wait=30s). A
// pair that does not decode is skipped: requestedIdentity, which every
// caller runs first, refuses such a query with a 400.
func queryValues(rawQuery, key string) []string {
	var vals []string
	for rawQuery != "" {
		var pair string
		pair, rawQuery, _ = strings.Cut(rawQuery, "&")
		rawKey, rawVal, _ := strings.Cut(pair, "=")
		if k, err := queryUnescape(rawKey); err != nil || k != key {
			continue
		}
		if v, err := queryUnescape(rawVal); err == nil {
			vals = append(vals, v)
		}
	}
	return vals
}

// etagOf returns d's ETag value.
func etagOf(d *Delivery) string {
	if d.hv != nil {
		return d.hv.vals[hvETag]
	}
	return `"` + d.ArtifactDigest + `"`
}

// EndWatches answers every held watch request at once (304 with the current
// headers) and makes later ones answer without waiting. NewServer registers
// it to run when the http.Server shuts down.
func (h *handler) EndWatches() {
	h.stopOnce.Do(func() { close(h.stopWatches) })
	h.parkedMu.Lock()
	all := make([]*parked, 0, len(h.parkedSet))
	for p := range h.parkedSet {
		all = append(all, p)
	}
	h.parkedMu.Unlock()
	for _, p := range all {
		go p.end("server shutting down")
	}
}

func (h *handler) stopped() bool {
	select {
	case <-h.stopWatches:
		return true
	default:
		return false
	}
}

// watchMaxKey is the header map key of X-Config-Watch-Max.
var watchMaxKey = bundle.HeaderWatchMax

// ParkedWatches reports how many held requests whose connections the
// handler took over are not yet answered and closed. http.Server.Shutdown
// does not wait for them (it no longer tracks those connections): Serve
// does, so that they are answered before the process exits and while the
// store still serves.
func (h *handler) ParkedWatches() int {
	h.parkedMu.Lock()
	defer h.parkedMu.Unlock()
	return h.unanswered
}

// watchEnder is what NewServer and Serve look for in a handler.
type watchEnder interface {
	EndWatches()
	ParkedWatches() int
}
