package webhook

import (
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"
)

// FuzzReceiverURL: whatever CONFIGPUB_WEBHOOK_URLS names, a receiver URL
// that New accepts can be sent to (an http or https request to a host with
// no port or one of 1-65535), and the name that stands for it in the
// delivery log and in messages is printable UTF-8 text that PostgreSQL
// stores, with neither the URL's credentials, path nor query.
func FuzzReceiverURL(f *testing.F) {
	for _, u := range []string{
		"https://hooks.example.com/services/T000/B000/XXXX",
		"http://127.0.0.1:8080/hook?token=secret",
		"https://user:pass@hooks.example.com/x",
		"https://[::1]:443/",
		"ftp://example.com/",
		"https:///path",
		"https://%e2%80%ae.example.com/",
	} {
		f.Add(u)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		n, err := New(Options{URLs: []string{raw}, Secret: []byte("s")})
		if err != nil {
			return
		}
		defer n.cancel()
		r := n.receivers[0]
		if _, err := http.NewRequest(http.MethodPost, r.url, nil); err != nil {
			t.Fatalf("accepted %q, which no request can be made for: %v", raw, err)
		}
		u, err := url.Parse(raw)
		if err != nil {
			t.Fatalf("accepted %q, which net/url refuses: %v", raw, err)
		}
		if p := u.Port(); p != "" {
			if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 {
				t.Fatalf("accepted %q, whose port %q no connection can be made to", raw, p)
			}
		}
		if !utf8.ValidString(r.name) || strings.ContainsFunc(r.name, func(c rune) bool { return unicode.IsControl(c) }) {
			t.Fatalf("receiver name %q is not printable UTF-8", r.name)
		}
		// scheme://host/…#<8 hex digits of the URL's digest>: nothing of
		// its credentials, path or query.
		if head := u.Scheme + "://" + u.Host + "/…#"; !strings.HasPrefix(r.name, head) || len(r.name) != len(head)+8 || strings.Contains(u.Host, "@") {
			t.Fatalf("receiver name %q is not %s and a digest", r.name, head)
		}
	})
}
