// Package webhook delivers promoter events (release state changes,
// rollbacks, rejections, unconfirmed outcomes) to HTTP receivers: a JSON
// body with a Slack-compatible "text" field, signed with HMAC-SHA256,
// retried with exponential back-off, each attempt bounded by a timeout and
// recorded in a delivery log. Delivery runs in the background: a slow,
// failing or dead receiver never blocks or fails a promotion. Each event is
// delivered on its own, so a receiver may get events in another order than
// they happened (a retried one after later ones): order them by the event's
// "at" time, and drop duplicates by its id.
package webhook

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/configpub/configpub/promoter"
)

// Headers of a delivery.
const (
	// HeaderSignature carries "sha256=" + hex(HMAC-SHA256(secret,
	// timestamp + "." + body)).
	HeaderSignature = "X-Configpub-Signature"
	// HeaderTimestamp is the Unix time (seconds) the attempt was signed.
	HeaderTimestamp = "X-Configpub-Timestamp"
	// HeaderEvent is the event kind; HeaderDelivery the event id (the same
	// for every attempt, so a receiver can drop duplicates).
	HeaderEvent    = "X-Configpub-Event"
	HeaderDelivery = "X-Configpub-Delivery"
)

// Payload is the JSON body of a delivery.
type Payload struct {
	// Text is a one-line summary; Slack incoming webhooks display it.
	Text  string         `json:"text"`
	Event promoter.Event `json:"event"`
}

// Attempt is one delivery attempt, as recorded in the delivery log.
type Attempt struct {
	EventID     string
	EventKind   string
	EnvTag      string
	Release     int64
	Receiver    string // scheme://host/… and a digest of the URL, never the URL itself
	Attempt     int    // 1-based
	Delivered   bool
	HTTPStatus  int // 0 when no response
	Error       string
	AttemptedAt time.Time
	Duration    time.Duration
}

// Log records delivery attempts; PGLog stores them in PostgreSQL.
type Log interface {
	Record(ctx context.Context, a Attempt) error
}

// EventLog is implemented by a Log that also keeps the events themselves,
// recorded once before their first attempt, so that Redeliver can send a
// missed one again. PGLog does.
type EventLog interface {
	RecordEvent(ctx context.Context, ev promoter.Event) error
}

// Options configures a Notifier.
type Options struct {
	// URLs are the receivers. Required.
	URLs []string
	// Secret keys the HMAC signature. Required.
	Secret []byte
	// Timeout bounds each attempt. Default 5 s.
	Timeout time.Duration
	// MaxAttempts bounds the attempts per receiver and event. Default 6.
	MaxAttempts int
	// Backoff is the wait before the second attempt, doubled after each
	// further one up to MaxBackoff. Defaults 1 s and 1 min.
	Backoff, MaxBackoff time.Duration
	// Log records every attempt. Default: none.
	Log Log
	// Client sends the requests. Default: a client without redirects.
	Client *http.Client
	// Clock and Sleep are injected by tests. Defaults time.Now and a
	// context-aware sleep.
	Clock func() time.Time
	Sleep func(ctx context.Context, d time.Duration) error
	// Logger receives failures (never a URL or body). Default: discard.
	Logger *slog.Logger
}

// Notifier delivers events in the background; Close waits for them.
type Notifier struct {
	opts      Options
	receivers []receiver
	ctx       context.Context
	cancel    context.CancelFunc
	wg        sync.WaitGroup
}

type receiver struct {
	url  string
	name string
}

var _ promoter.Notifier = (*Notifier)(nil)

// New validates opts and returns a Notifier.
func New(opts Options) (*Notifier, error) {
	if len(opts.URLs) == 0 {
		return nil, errors.New("webhook: no receiver URL")
	}
	if len(opts.Secret) == 0 {
		return nil, errors.New("webhook: empty signing secret")
	}
	if opts.Timeout <= 0 {
		opts.Timeout = 5 * time.Second
	}
	if opts.MaxAttempts <= 0 {
		opts.MaxAttempts = 6
	}
	if opts.Backoff <= 0 {
		opts.Backoff = time.Second
	}
	if opts.MaxBackoff <= 0 {
		opts.MaxBackoff = time.Minute
	}
	if opts.Client == nil {
		opts.Client = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	}
	if opts.Clock == nil {
		opts.Clock = time.Now
	}
	if opts.Sleep == nil {
		opts.Sleep = sleep
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	n := &Notifier{opts: opts}
	for i, raw := range opts.URLs {
		u, err := url.Parse(raw)
		if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
			return nil, fmt.Errorf("webhook: receiver %d: want an http(s) URL", i+1)
		}
		if !utf8.ValidString(u.Host) || strings.ContainsFunc(u.Host, unicode.IsControl) {
			// The host names the receiver in the delivery log (PostgreSQL
			// text) and in messages.
			return nil, fmt.Errorf("webhook: receiver %d: the host is not UTF-8 text without control characters", i+1)
		}
		if p := u.Port(); p != "" {
			if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 {
				return nil, fmt.Errorf("webhook: receiver %d: port %s is not one of 1-65535", i+1, p)
			}
		}
		sum := sha256.Sum256([]byte(raw))
		n.receivers = append(n.receivers, receiver{url: raw, name: u.Scheme + "://" + u.Host + "/…#" + hex.EncodeToString(sum[:4])})
	}
	n.ctx, n.cancel = context.WithCancel(context.Background())
	return n, nil
}

// recordTimeout is the least time an event's recording is given.
const recordTimeout = 5 * time.Second

// Notify starts delivering ev to every receiver and returns at once. With
// an EventLog, the event is recorded first.
func (n *Notifier) Notify(_ context.Context, ev promoter.Event) {
	body, err := json.Marshal(Payload{Text: ev.Text(), Event: ev})
	if err != nil {
		n.opts.Logger.Warn("webhook: encode event", "kind", ev.Kind, "err", err)
		return
	}
	n.wg.Add(1)
	go func() {
		defer n.wg.Done()
		if el, ok := n.opts.Log.(EventLog); ok {
			// Recorded even when Close abandons the deliveries: it is what
			// lets a missed event be delivered later.
			ctx, cancel := context.WithTimeout(context.WithoutCancel(n.ctx), max(n.opts.Timeout, recordTimeout))
			if err := el.RecordEvent(ctx, ev); err != nil {
				n.opts.Logger.Warn("webhook: record event", "kind", ev.Kind, "err", err)
			}
			cancel()
		}
		for _, r := range n.receivers {
			n.wg.Add(1)
			go func() {
				defer n.wg.Done()
				n.deliver(n.ctx, r, ev, body)
			}()
		}
	}()
}

// Close waits for the deliveries in flight until ctx ends, then abandons
// the rest (their attempts so far are logged; an event being recorded is
// still recorded, within its own bound). It returns ctx's error when
// deliveries were abandoned.
func (n *Notifier) Close(ctx context.Context) error {
	done := make(chan struct{})
	go func() { n.wg.Wait(); close(done) }()
	select {
	case <-done:
		n.cancel()
		return nil
	case <-ctx.Done():
		n.cancel()
		<-done
		return fmt.Errorf("webhook: deliveries abandoned: %w", ctx.Err())
	}
}

// outcome is how one event's delivery to one receiver ended.
type outcome int

const (
	accepted outcome = iota // 2xx
	refused                 // a 4xx other than 408 and 429: never tried again
	failed                  // MaxAttempts reached, or the context ended
)

// deliver attempts one event to one receiver until it is accepted (2xx),
// refused for good (a 4xx other than 408 and 429), or MaxAttempts is
// reached.
func (n *Notifier) deliver(ctx context.Context, r receiver, ev promoter.Event, body []byte) outcome {
	wait := n.opts.Backoff
	for attempt := 1; attempt <= n.opts.MaxAttempts; attempt++ {
		a := Attempt{EventID: ev.ID, EventKind: ev.Kind, EnvTag: ev.EnvTag, Release: ev.Release, Receiver: r.name,
			Attempt: attempt, AttemptedAt: n.opts.Clock().UTC()}
		start := time.Now()
		status, err := n.send(ctx, r.url, ev, body)
		a.Duration, a.HTTPStatus = time.Since(start), status
		a.Delivered = err == nil && status >= 200 && status < 300
		if err != nil {
			a.Error = printable(err.Error())
		} else if !a.Delivered {
			a.Error = "HTTP " + strconv.Itoa(status)
		}
		if n.opts.Log != nil {
			lctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), n.opts.Timeout)
			if lerr := n.opts.Log.Record(lctx, a); lerr != nil {
				n.opts.Logger.Warn("webhook: record delivery attempt", "receiver", r.name, "err", lerr)
			}
			cancel()
		}
		if a.Delivered {
			return accepted
		}
		n.opts.Logger.Warn("webhook: delivery failed", "receiver", r.name, "event", ev.Kind, "attempt", attempt, "err", a.Error)
		if err == nil && status >= 400 && status < 500 && status != http.StatusRequestTimeout && status != http.StatusTooManyRequests {
			return refused
		}
		if attempt == n.opts.MaxAttempts || n.opts.Sleep(ctx, wait) != nil {
			return failed
		}
		wait = min(2*wait, n.opts.MaxBackoff)
	}
	return failed
}

func (n *Notifier) send(ctx context.Context, target string, ev promoter.Event, body []byte) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, n.opts.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, target, bytes.NewReader(body))
	if err != nil {
		return 0, errors.New("cannot build the request")
	}
	ts := strconv.FormatInt(n.opts.Clock().Unix(), 10)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "configpub-webhook")
	req.Header.Set(HeaderEvent, ev.Kind)
	req.Header.Set(HeaderDelivery, ev.ID)
	req.Header.Set(HeaderTimestamp, ts)
	req.Header.Set(HeaderSignature, Sign(n.opts.Secret, ts, body))
	resp, err := n.opts.Client.Do(req)
	if err != nil {
		// The error names the URL; report only what happened.
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		if errors.Is(err, context.DeadlineExceeded) {
			return 0, fmt.Errorf("no answer within %s", n.opts.Timeout)
		}
		return 0, err
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	_ = resp.Body.Close()
	return resp.StatusCode, nil
}

// Sign returns the signature header value of body sent at timestamp ts.
func Sign(secret []byte, ts string, body []byte) string {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte(ts))
	m.Write([]byte("."))
	m.Write(body)
	return "sha256=" + hex.EncodeToString(m.Sum(nil))
}

// Verify checks a delivery's signature header against secret, the
// timestamp header and the exact body, in constant time.
func Verify(secret []byte, ts string, body []byte, signature string) error {
	if !hmac.Equal([]byte(Sign(secret, ts, body)), []byte(signature)) {
		return errors.New("webhook: signature does not match")
	}
	return nil
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// printable drops control characters and bounds the length.
func printable(s string) string {
	s = strings.Map(func(r rune) rune {
		if unicode.IsControl(r) {
			return ' '
		}
		return r
	}, s)
	if len(s) > 300 {
		s = s[:300]
	}
	return s
}
