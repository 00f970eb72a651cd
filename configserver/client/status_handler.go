package client

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/configpub/configpub/bundle"
	"github.com/configpub/configpub/internal/controltoken"
	"github.com/configpub/configpub/internal/signing"
)

// DefaultReloadTimeout bounds a control-plane reload when
// StatusOptions.ReloadTimeout is 0.
const DefaultReloadTimeout = 30 * time.Second

// maxReplayEntries bounds the reload token ids remembered against replay.
const maxReplayEntries = 10_000

// StatusOptions configures StatusHandler. ControlKeys is required.
type StatusOptions struct {
	// ControlKeys are the control plane's public keys (cosign.pub format,
	// ECDSA P-256). A request to the status or reload endpoint must carry a
	// control token (Authorization: Bearer) signed by one of them, for this
	// runtime's identity and the endpoint's scope. They must differ from
	// the delivery-manifest keys: the control plane's reader never holds
	// the key that vouches for configuration.
	ControlKeys []TrustedKey
	// AnonymousStatus serves GET /status without a token (for a port only
	// the pod can reach). POST /reload always needs one.
	AnonymousStatus bool
	// ReloadTimeout bounds the load a reload request runs. 0 means
	// DefaultReloadTimeout.
	ReloadTimeout time.Duration
	// AfterReload, when set, is called with the evidence of every load a
	// reload request ran, before the answer is written (the fetch sidecar
	// writes its --out file there).
	AfterReload func(ctx context.Context, ev *Evidence, err error)
	// Running, when set, says what the runtime runs, for one that applies
	// the client's current snapshot itself and can fail to (the fetch
	// sidecar writes it to a file its runtime reads): the status shows
	// running as current and last-known-good (none when nil) instead of the
	// client's current and persisted snapshot, and failed, when not nil, as
	// the last rejected snapshot and the last load (REJECTED
	// OUT_UNWRITABLE), so that the control plane never reads a snapshot as
	// running, or as what the runtime falls back on, that the runtime has
	// not received (Client.RunningStatus). Without it the status shows the
	// client's current snapshot.
	Running func() (running *Snapshot, failed *Evidence)
}

// StatusHandler returns the runtime's local control endpoint:
//
//	GET  /status  the bundle.RuntimeStatus JSON (control token scope "status")
//	POST /reload  loads now (Load), then answers the RuntimeStatus JSON
//	              with the load's outcome in lastLoad (scope "reload")
//	POST /prefetch verifies the staged candidate now (Prefetch), then
//	              answers with its result in the candidate slot (scope
//	              "prefetch")
//
// Each reload or prefetch token id is accepted once.
//
// Control tokens are ES256 compact JWS tokens (internal/controltoken: typ
// configpub-control+jwt, aud host/serviceId/envTag, scope, iat, exp at most
// 5 minutes later, jti) verified against ControlKeys with the client's clock
// and skew. A refusal is 401 with a JSON body {"error", "reason"} that names
// what failed and never echoes the token. Mount it under any prefix with
// http.StripPrefix.
func (c *Client) StatusHandler(opts StatusOptions) (http.Handler, error) {
	if len(opts.ControlKeys) == 0 {
		return nil, errors.New("status handler: no control key")
	}
	c.mu.Lock() // against SetTrustedKeys
	defer c.mu.Unlock()
	for i, k := range opts.ControlKeys {
		if k.Key == nil {
			return nil, errors.New("status handler: control key " + strconv.Itoa(i) + " is empty")
		}
		for _, m := range c.trustedKeys() {
			if m.ID == k.ID {
				return nil, errors.New("status handler: control key " + k.ID + " is also a delivery-manifest key; use a key of its own")
			}
		}
	}
	for _, k := range opts.ControlKeys {
		c.controlKeys = append(c.controlKeys, k.ID)
	}
	if opts.ReloadTimeout <= 0 {
		opts.ReloadTimeout = DefaultReloadTimeout
	}
	opts.ControlKeys = append([]signing.TrustedKey(nil), opts.ControlKeys...)
	return &statusHandler{c: c, opts: opts, seen: map[string]time.Time{}}, nil
}

type statusHandler struct {
	c    *Client
	opts StatusOptions

	mu   sync.Mutex
	seen map[string]time.Time // reload token id -> its exp
}

// Control-endpoint refusal reasons (the "reason" of a 4xx body).
const (
	ReasonControlTokenMissing   Reason = "CONTROL_TOKEN_MISSING"
	ReasonControlTokenInvalid   Reason = "CONTROL_TOKEN_INVALID"
	ReasonControlTokenUntrusted Reason = "CONTROL_TOKEN_UNTRUSTED"
	ReasonControlTokenExpired   Reason = "CONTROL_TOKEN_EXPIRED"
	ReasonControlTokenAudience  Reason = "CONTROL_TOKEN_AUDIENCE"
	ReasonControlTokenScope     Reason = "CONTROL_TOKEN_SCOPE"
	ReasonControlTokenReplayed  Reason = "CONTROL_TOKEN_REPLAYED"
)

func (h *statusHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Cache-Control", "no-store")
	switch r.URL.Path {
	case "/status":
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			writePeerError(w, http.StatusMethodNotAllowed, "METHOD_NOT_ALLOWED", "use GET")
			return
		}
		if !h.opts.AnonymousStatus {
			if _, ok := h.authorize(w, r, controltoken.ScopeStatus); !ok {
				return
			}
		}
		writeJSON(w, h.status())
	case "/reload", "/prefetch":
		if r.Method != http.MethodPost {
			w.Header().Set("Allow", "POST")
			writePeerError(w, http.StatusMethodNotAllowed, "METHOD_NOT_ALLOWED", "use POST")
			return
		}
		scope := controltoken.ScopeReload
		if r.URL.Path == "/prefetch" {
			scope = controltoken.ScopePrefetch
		}
		claims, ok := h.authorize(w, r, scope)
		if !ok {
			return
		}
		if !h.once(claims, h.c.opts.Clock.Now()) {
			writeControlError(w, ReasonControlTokenReplayed, "control token already used")
			return
		}
		ctx, cancel := context.WithTimeout(r.Context(), h.opts.ReloadTimeout)
		defer cancel()
		if scope == controltoken.ScopePrefetch {
			_, _ = h.c.Prefetch(ctx) // the result is in the candidate slot
		} else {
			ev, err := h.c.Load(ctx)
			if h.opts.AfterReload != nil {
				h.opts.AfterReload(ctx, ev, err)
			}
		}
		writeJSON(w, h.status())
	default:
		http.NotFound(w, r)
	}
}

// status is the client's status, with what StatusOptions.Running says the
// runtime runs.
func (h *statusHandler) status() *bundle.RuntimeStatus {
	return h.c.RunningStatus(h.opts.Running)
}

// authorize verifies the request's control token for scope; on failure it
// writes the 401 and returns false.
func (h *statusHandler) authorize(w http.ResponseWriter, r *http.Request, scope string) (*controltoken.Claims, bool) {
	auth := r.Header.Get("Authorization")
	tok, found := strings.CutPrefix(auth, "Bearer ")
	if !found || tok == "" {
		writeControlError(w, ReasonControlTokenMissing, "Authorization: Bearer <control token> required")
		return nil, false
	}
	claims, err := controltoken.Verify(h.opts.ControlKeys, tok, h.c.opts.Clock.Now(), h.c.opts.Skew, h.c.opts.Identity.String(), scope)
	if err != nil {
		reason := ReasonControlTokenInvalid
		switch {
		case errors.Is(err, controltoken.ErrUntrustedKey):
			reason = ReasonControlTokenUntrusted
		case errors.Is(err, controltoken.ErrExpired):
			reason = ReasonControlTokenExpired
		case errors.Is(err, controltoken.ErrAudience):
			reason = ReasonControlTokenAudience
		case errors.Is(err, controltoken.ErrScope):
			reason = ReasonControlTokenScope
		}
		writeControlError(w, reason, err.Error())
		return nil, false
	}
	return claims, true
}

// once accepts each reload token id once while it is valid.
func (h *statusHandler) once(c *controltoken.Claims, now time.Time) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if _, dup := h.seen[c.ID]; dup {
		return false
	}
	if len(h.seen) >= maxReplayEntries {
		for id, exp := range h.seen {
			if now.Add(-h.c.opts.Skew).After(exp) {
				delete(h.seen, id)
			}
		}
		if len(h.seen) >= maxReplayEntries {
			return false
		}
	}
	h.seen[c.ID] = time.Unix(c.Expires, 0)
	return true
}

func writeControlError(w http.ResponseWriter, reason Reason, msg string) {
	w.Header().Set("WWW-Authenticate", `Bearer realm="configpub-runtime"`)
	writePeerError(w, http.StatusUnauthorized, string(reason), msg)
}

func writeJSON(w http.ResponseWriter, st *bundle.RuntimeStatus) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(st)
}
