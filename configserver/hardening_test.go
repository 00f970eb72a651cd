package configserver_test

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/configpub/configpub/configserver"
)

// TestSlowHeaderAndOversizedHeaders: a client that never finishes its
// headers is cut off by ReadHeaderTimeout while others are served; headers
// past MaxHeaderBytes get 431.
func TestSlowHeaderAndOversizedHeaders(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	sn := e.seed.publish(t, idA, "agent", 1, yamlBody("hardening-body"))
	e.seed.move(t, sn)
	waitServed(t, e, idA, "agent", sn.ID)
	base := e.serve(t, configserver.ServerOptions{ReadHeaderTimeout: 300 * time.Millisecond, MaxHeaderBytes: 16 << 10})
	addr := strings.TrimPrefix(base, "http://")

	slow, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer slow.Close()
	if _, err := slow.Write([]byte("GET /configs?host=h1.example HTTP/1.1\r\nHost: x\r\nX-Slow: ")); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	closed := make(chan time.Duration, 1)
	go func() {
		_ = slow.SetReadDeadline(time.Now().Add(5 * time.Second))
		_, err := io.Copy(io.Discard, slow) // returns when the server closes
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			closed <- -1
			return
		}
		closed <- time.Since(start)
	}()
	tok := e.token(t, idA, "agent")
	client := &http.Client{Timeout: 5 * time.Second}
	for i := 0; i < 5; i++ {
		if resp, _ := doURL(t, client, "GET", base+configsPath(idA), tok); resp.StatusCode != 200 {
			t.Fatalf("request %d while a slow client stalls: got %d, want 200", i, resp.StatusCode)
		}
	}
	d := <-closed
	if d < 0 {
		t.Fatal("slow-header connection still open after 5s, want it closed by ReadHeaderTimeout")
	}
	if d < 250*time.Millisecond || d > 3*time.Second {
		t.Fatalf("slow-header connection closed after %s, want about 300ms", d)
	}

	resp, _ := doURL(t, client, "GET", base+configsPath(idA), tok, "X-Big", strings.Repeat("b", 64<<10))
	if resp.StatusCode != http.StatusRequestHeaderFieldsTooLarge {
		t.Fatalf("oversized headers: got %d, want 431", resp.StatusCode)
	}
	if resp, _ := doURL(t, client, "GET", base+configsPath(idA), tok); resp.StatusCode != 200 {
		t.Fatalf("after 431: got %d, want 200", resp.StatusCode)
	}
}

// TestAccessLogHasNoBodyOrToken: a run of 200, 304, HEAD, historical and
// refused requests leaves access-log records with identifiers and statuses
// but no 12-byte run of any served body and nothing of the token.
func TestAccessLogHasNoBodyOrToken(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	body := []byte("schemaVersion: 1\nagentPolicy:\n  apiKeyHint: do-not-log-4b1d9e\n  rules:\n    - allow: everything-secret\n")
	sn := e.seed.publish(t, idA, "agent", 1, body)
	e.seed.move(t, sn)
	waitServed(t, e, idA, "agent", sn.ID)
	tok := e.token(t, idA, "agent")
	e.do(t, "GET", configsPath(idA), tok)
	e.do(t, "GET", configsPath(idA), tok, "If-None-Match", `"`+sn.ArtifactDigest+`"`)
	e.do(t, "HEAD", configsPath(idA), tok)
	e.do(t, "GET", "/configs/snapshots/"+sn.ID, tok)
	e.do(t, "GET", "/configs?host=h2.example", tok)
	e.do(t, "GET", configsPath(idA), tok+"x")
	e.do(t, "GET", configsPath(idA), "")

	logs := e.logs.Bytes()
	if !bytes.Contains(logs, []byte(`"snapshotId":"`+sn.ID+`"`)) || !bytes.Contains(logs, []byte(`"status":304`)) ||
		!bytes.Contains(logs, []byte(`"host":"h1.example"`)) || !bytes.Contains(logs, []byte(`"bytes":`)) {
		t.Fatalf("access log lacks identifiers/status/size:\n%s", logs)
	}
	if n := bytes.Count(logs, []byte("\n")); n < 7 {
		t.Fatalf("got %d access-log records, want at least 7", n)
	}
	for i := 0; i+12 <= len(body); i++ {
		if bytes.Contains(logs, body[i:i+12]) {
			t.Fatalf("access log contains body bytes %q:\n%s", body[i:i+12], logs)
		}
	}
	for i := 0; i+16 <= len(tok); i += 4 {
		if bytes.Contains(logs, []byte(tok[i:i+16])) {
			t.Fatalf("access log contains token bytes")
		}
	}
	if testing.Verbose() {
		sc := bufio.NewScanner(bytes.NewReader(logs))
		for sc.Scan() {
			os.Stderr.WriteString(sc.Text() + "\n")
		}
	}
}
