package configserver_test

import (
	"bytes"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/configpub/configpub/configserver"
)

// TestAccessLogModes: --access-log all logs every request, failures only
// those answered 4xx or 5xx, none nothing; /metrics counts every request
// whatever the mode.
func TestAccessLogModes(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		mode     string
		wantLogs map[int]int // status -> access-log lines
	}{
		{"all", map[int]int{200: 2, 304: 1, 401: 1}},
		{"failures", map[int]int{200: 0, 304: 0, 401: 1}},
		{"none", map[int]int{200: 0, 304: 0, 401: 0}},
	} {
		t.Run(tc.mode, func(t *testing.T) {
			t.Parallel()
			mode, err := configserver.ParseAccessLogMode(tc.mode)
			if err != nil || mode.String() != tc.mode {
				t.Fatalf("parse %q: %v, %v", tc.mode, mode, err)
			}
			e := newEnv(t, envOptions{handler: configserver.Options{AccessLog: mode}})
			sn := e.seed.publish(t, idA, "agent", 1, yamlBody("access-log"))
			e.seed.move(t, sn)
			waitServed(t, e, idA, "agent", sn.ID)
			tok := e.token(t, idA, "agent")
			before := len(e.logs.Bytes())
			resp, _ := e.do(t, "GET", configsPath(idA), tok)
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("GET: %d", resp.StatusCode)
			}
			if resp, _ = e.do(t, "GET", configsPath(idA), tok, "If-None-Match", resp.Header.Get("ETag")); resp.StatusCode != http.StatusNotModified {
				t.Fatalf("conditional GET: %d", resp.StatusCode)
			}
			if resp, _ = e.do(t, "GET", configsPath(idA), tok+"x"); resp.StatusCode != http.StatusUnauthorized {
				t.Fatalf("bad token: %d", resp.StatusCode)
			}
			if resp, _ = e.do(t, "GET", "/healthz", ""); resp.StatusCode != http.StatusOK {
				t.Fatalf("/healthz: %d", resp.StatusCode)
			}
			logs := e.logs.Bytes()[before:]
			for status, want := range tc.wantLogs {
				n := 0
				for line := range strings.Lines(string(logs)) {
					if strings.Contains(line, `"msg":"request"`) && strings.Contains(line, `"status":`+strconv.Itoa(status)+`,`) {
						n++
					}
				}
				if n != want {
					t.Errorf("mode %s: %d access-log lines with status %d, want %d:\n%s", tc.mode, n, status, want, logs)
				}
			}
			_, metrics := e.do(t, "GET", "/metrics", "")
			if !bytes.Contains(metrics, []byte(`configpub_server_requests_total{code="401",route="configs"} 1`)) {
				t.Errorf("mode %s: /metrics does not count the 401:\n%s", tc.mode, metrics)
			}
		})
	}
}
