package console

import (
	"context"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
)

type userKey struct{}

// user returns who the request was accepted as ("local" for a loopback
// client without credentials).
func user(r *http.Request) string {
	u, _ := r.Context().Value(userKey{}).(string)
	return u
}

// authenticate decides who may read the console:
//   - a bearer token must verify (never falls back to anything else);
//   - a peer among TrustedProxies must send ProxyHeader;
//   - a loopback peer without credentials is served;
//   - anyone else is refused with 401.
func (c *Console) authenticate(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		who, reason := c.identify(r)
		if who == "" {
			c.opts.Logger.Warn("console request refused", "remote", r.RemoteAddr, "path", r.URL.Path, "reason", reason)
			w.Header().Set("WWW-Authenticate", `Bearer realm="configpub-console"`)
			writeError(w, r, http.StatusUnauthorized, "credentials required: "+reason)
			return
		}
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), userKey{}, who)))
	})
}

func (c *Console) identify(r *http.Request) (who, reason string) {
	if h := r.Header.Get("Authorization"); h != "" {
		raw, ok := strings.CutPrefix(h, "Bearer ")
		if !ok {
			return "", "authorization is not a bearer token"
		}
		if c.opts.Verifier == nil {
			return "", "bearer tokens are not configured"
		}
		cl, err := c.opts.Verifier.Verify(strings.TrimSpace(raw))
		if err != nil {
			return "", "invalid bearer token"
		}
		return "token:" + cl.Subject, ""
	}
	peer, ok := peerAddr(r.RemoteAddr)
	if !ok {
		return "", "unknown peer address"
	}
	for _, p := range c.opts.TrustedProxies {
		if p.Contains(peer) {
			if c.opts.ProxyHeader == "" {
				break
			}
			if u := strings.TrimSpace(r.Header.Get(c.opts.ProxyHeader)); u != "" {
				return "proxy:" + u, ""
			}
			return "", "trusted proxy sent no " + c.opts.ProxyHeader
		}
	}
	if peer.IsLoopback() {
		// A loopback peer is served without credentials only under a
		// loopback name: a web page whose domain an attacker re-points to
		// 127.0.0.1 (DNS rebinding) is same-origin with the console and
		// would read it through the operator's browser, with its own
		// domain in Host.
		if !loopbackHost(r.Host) {
			return "", "host " + strconv.Quote(r.Host) + " is not a loopback name (localhost, 127.0.0.1, [::1]): open the console by one, or give it --jwks"
		}
		return "local", ""
	}
	return "", "not a loopback client"
}

// loopbackHost reports whether a request's Host (host[:port]) names the
// loopback interface: localhost (or a name under .localhost, which
// resolves there by RFC 6761) or a loopback address.
func loopbackHost(hostport string) bool {
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.ToLower(host), ".")
	if host == "localhost" || strings.HasSuffix(host, ".localhost") {
		return true
	}
	a, err := netip.ParseAddr(strings.TrimSuffix(strings.TrimPrefix(host, "["), "]"))
	return err == nil && a.Unmap().IsLoopback()
}

func peerAddr(remote string) (netip.Addr, bool) {
	host, _, err := net.SplitHostPort(remote)
	if err != nil {
		host = remote
	}
	a, err := netip.ParseAddr(host)
	if err != nil {
		return netip.Addr{}, false
	}
	return a.Unmap(), true
}

// IsLoopbackListen reports whether addr (host:port) binds only loopback.
func IsLoopbackListen(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	a, err := netip.ParseAddr(host)
	return err == nil && a.IsLoopback()
}
