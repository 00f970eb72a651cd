package pgsession_test

import (
	"context"
	"net/url"
	"strings"
	"testing"

	"github.com/configpub/configpub/internal/pgsession"
	"github.com/configpub/configpub/internal/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// TestSessionTurnsJITOff: a configpub session runs with jit off, unless its
// URL sets jit, as a parameter or inside options; other parameters of the
// URL are kept.
func TestSessionTurnsJITOff(t *testing.T) {
	db := pgtest.New(t)
	ctx := context.Background()
	with := func(params url.Values) string {
		u, err := url.Parse(db.URL)
		if err != nil {
			t.Fatal(err)
		}
		q := u.Query()
		for k, v := range params {
			q[k] = v
		}
		u.RawQuery = strings.ReplaceAll(q.Encode(), "+", "%20") // libpq reads + literally
		return u.String()
	}
	for _, c := range []struct {
		name   string
		params url.Values
		want   string
	}{
		{"defaults", nil, "off"},
		{"jit in the URL", url.Values{"jit": {"on"}}, "on"},
		{"jit in options", url.Values{"options": {"-c jit=on -c work_mem=8MB"}}, "on"},
		{"jit in options, long form", url.Values{"options": {"--jit=on"}}, "on"},
		{"other options", url.Values{"options": {"-c work_mem=8MB"}}, "off"},
	} {
		t.Run(c.name, func(t *testing.T) {
			pool, err := pgsession.NewPool(ctx, with(c.params))
			if err != nil {
				t.Fatal(err)
			}
			defer pool.Close()
			var jit, workMem string
			if err := pool.QueryRow(ctx, "SELECT current_setting('jit'), current_setting('work_mem')").Scan(&jit, &workMem); err != nil {
				t.Fatal(err)
			}
			if jit != c.want {
				t.Errorf("jit = %s, want %s", jit, c.want)
			}
			if c.params.Get("options") != "" && c.params.Get("options") != "--jit=on" && workMem != "8MB" {
				t.Errorf("work_mem = %s, want the URL's 8MB", workMem)
			}
		})
	}
	if _, err := pgsession.ParsePool("postgres://[::1"); err == nil {
		t.Error("ParsePool accepted a malformed URL")
	}
}
