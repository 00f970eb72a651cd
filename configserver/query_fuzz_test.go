package configserver

import (
	"net/http"
	"net/url"
	"testing"

	"github.com/configpub/configpub/configserver/auth"
)

// FuzzRequestedIdentity: whatever the query string, the identity the
// handler looks up is exactly the token's, or the request is refused
// (400/403). Nothing in the query widens the token.
func FuzzRequestedIdentity(f *testing.F) {
	for _, q := range []string{
		"host=h1&serviceId=s1&envTag=prod",
		"host=h1",
		"host=h1&serviceId=s2",
		"host=h1&host=h2",
		"host=h%31&serviceId=s%31&envTag=pro%64",
		"host=h1&productId=p&apiId=h2&configPhase=x",
		"host=h1;serviceId=s1",
		"host=%zz",
		"&&host=h1&&",
		"host=h1&serviceId=&envTag=prod",
	} {
		f.Add(q)
	}
	c := &auth.Claims{Host: "h1", ServiceID: "s1", EnvTag: "prod", ConfigAudience: "agent"}
	f.Fuzz(func(t *testing.T, q string) {
		id, herr := requestedIdentity(q, c)
		if herr != nil {
			if herr.status != http.StatusBadRequest && herr.status != http.StatusForbidden {
				t.Fatalf("query %q: status %d, want 400 or 403", q, herr.status)
			}
			return
		}
		if id != c.Identity() {
			t.Fatalf("query %q selected %v, want only the token's %v", q, id, c.Identity())
		}
		// Cross-check with net/url: an accepted query has host=h1.
		if v, err := url.ParseQuery(q); err == nil && v.Get("host") != "h1" {
			t.Fatalf("query %q accepted although net/url reads host %q", q, v.Get("host"))
		}
	})
}
