//go:build e2e

package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// keptDemo is a `configpub demo --keep` run: every service stays up until
// stop.
type keptDemo struct {
	cmd        *exec.Cmd
	state      string
	consoleURL string // http://127.0.0.1:PORT/
	promoterDB string
	done       chan struct{}
}

// startKeptDemo runs the demo with --keep and waits for its service list.
func startKeptDemo(t *testing.T, bin, state string) *keptDemo {
	t.Helper()
	cmd := exec.Command(bin, "demo", "--keep", "--dir", state)
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = pw, pw
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pw.Close()
	d := &keptDemo{cmd: cmd, state: state, done: make(chan struct{})}
	ready := make(chan struct{})
	var out strings.Builder
	go func() {
		defer close(d.done)
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			line := sc.Text()
			out.WriteString(line + "\n")
			f := strings.Fields(line)
			switch {
			case len(f) == 2 && f[0] == "PostgreSQL" && strings.HasPrefix(f[1], "postgres://"):
				d.promoterDB = f[1]
			case len(f) == 3 && f[0] == "Operator" && f[1] == "console" && strings.HasPrefix(f[2], "http://"):
				d.consoleURL = f[2]
				close(ready)
			}
		}
		_ = cmd.Wait()
	}()
	t.Cleanup(func() { d.stop(t) })
	select {
	case <-ready:
	case <-d.done:
		t.Fatalf("configpub demo --keep ended before listing its services:\n%s", out.String())
	case <-time.After(10 * time.Minute):
		t.Fatalf("configpub demo --keep did not finish in 10 minutes:\n%s", out.String())
	}
	return d
}

// stop sends Ctrl-C and checks that nothing is left running.
func (d *keptDemo) stop(t *testing.T) {
	if d.cmd.Process == nil {
		return
	}
	_ = d.cmd.Process.Signal(syscall.SIGINT)
	select {
	case <-d.done:
	case <-time.After(60 * time.Second):
		_ = d.cmd.Process.Kill()
		t.Errorf("configpub demo --keep did not stop within 60 s of Ctrl-C")
	}
	noLeftovers(t, d.state)
}

// chromium finds the browser: $CONFIGPUB_CHROMIUM, else chromium on PATH
// (scripts/ensure-chromium.sh installs Debian's package).
func chromium(t *testing.T) string {
	if p := os.Getenv("CONFIGPUB_CHROMIUM"); p != "" {
		return p
	}
	for _, n := range []string{"chromium", "chromium-browser", "google-chrome-stable", "google-chrome"} {
		if p, err := exec.LookPath(n); err == nil {
			return p
		}
	}
	t.Fatal("no Chromium found: run scripts/ensure-chromium.sh or set CONFIGPUB_CHROMIUM")
	return ""
}

// leakCheck collects every page body the test saw, from the browser's DOM
// and fetched again over HTTP, and the secrets none may contain.
type leakCheck struct {
	bodies map[string]string
	bad    []string
}

func (l *leakCheck) add(name, body string) { l.bodies[name] = body }

func (l *leakCheck) check(t *testing.T) {
	t.Helper()
	if len(l.bodies) < 8 {
		t.Errorf("leak check saw only %d bodies", len(l.bodies))
	}
	for name, b := range l.bodies {
		for _, bad := range l.bad {
			if strings.Contains(b, bad) {
				t.Errorf("%s contains %q", name, short(bad))
			}
		}
	}
}

func short(s string) string {
	if len(s) > 40 {
		return s[:40] + "…"
	}
	return s
}

func TestConsoleInBrowser(t *testing.T) {
	chrome := chromium(t)
	tmp := stateDir(t)
	bin := build(t, tmp)
	state := filepath.Join(tmp, "demo")
	d := startKeptDemo(t, bin, state)
	base := strings.TrimSuffix(d.consoleURL, "/")

	shots := os.Getenv("CONFIGPUB_E2E_ARTIFACTS")
	if shots == "" {
		var err error
		if shots, err = os.MkdirTemp("", "configpub-console-screenshots-"); err != nil {
			t.Fatal(err)
		}
	}
	shots = filepath.Join(shots, "console")
	if err := os.MkdirAll(shots, 0o755); err != nil {
		t.Fatal(err)
	}
	fmt.Printf("console screenshots: %s\n", shots)
	t.Logf("console screenshots: %s", shots)

	leaks := &leakCheck{bodies: map[string]string{}, bad: []string{"vault://", "eyJhbGci", "Bearer ",
		"You are the account assistant", "Never reveal another customer's data"}}
	tokens, _ := filepath.Glob(filepath.Join(state, "runtimes", "*", "token.jwt"))
	for _, f := range tokens {
		if b, err := os.ReadFile(f); err == nil && len(b) > 20 {
			leaks.bad = append(leaks.bad, strings.TrimSpace(string(b)))
		}
	}
	values, _ := filepath.Glob(filepath.Join(state, "runtimes", "*", "values.yml"))
	for _, f := range values {
		if b, err := os.ReadFile(f); err == nil {
			leaks.bad = append(leaks.bad, string(b))
		}
	}

	udd := t.TempDir()
	actx, cancelA := chromedp.NewExecAllocator(context.Background(),
		chromedp.ExecPath(chrome),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.NoFirstRun,
		chromedp.UserDataDir(udd),
		chromedp.WindowSize(1280, 900),
		chromedp.Flag("disable-dev-shm-usage", true),
	)
	defer cancelA()
	ctx, cancel := chromedp.NewContext(actx)
	defer cancel()
	ctx, cancelT := context.WithTimeout(ctx, 3*time.Minute)
	defer cancelT()

	shot := func(name string) {
		t.Helper()
		png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100)) // quality 100: PNG
		if err != nil {
			t.Fatalf("screenshot %s: %v", name, err)
		}
		if err := os.WriteFile(filepath.Join(shots, name+".png"), png, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	mainText := func() string {
		t.Helper()
		s, err := chromedp.Run(ctx, chromedp.Text(chromedp.ID("main")))
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	record := func(name string) {
		t.Helper()
		html, err := chromedp.Run(ctx, chromedp.OuterHTML(chromedp.CSS("html")))
		if err != nil {
			t.Fatal(err)
		}
		loc, err := chromedp.Run(ctx, chromedp.Location())
		if err != nil {
			t.Fatal(err)
		}
		leaks.add("DOM of "+name, html)
		leaks.add("GET "+loc, get(t, loc, 200))
	}

	// 1. The timeline of the demo's environment: releases 1 and 2 and the rollback.
	if err := chromedp.Do(ctx, chromedp.Navigate(base+"/env/dev"), chromedp.WaitVisible(chromedp.ID("release-2"))); err != nil {
		t.Fatal(err)
	}
	tl := mainText()
	for _, want := range []string{"Release 1", "Release 2", "Rollback to release 1", "ROLLED_BACK", "CURRENT",
		"effective policy", "VALIDATED", "Agent snapshot", "Gateway snapshot", "Knowledge snapshot", "previous release"} {
		if !strings.Contains(tl, want) {
			t.Errorf("timeline lacks %q", want)
		}
	}
	// Each release says until when it can be activated or rolled back to.
	if n := len(regexp.MustCompile(`activatable\s*until \d{4}-\d\d-\d\d \d\d:\d\d:\d\dZ`).FindAllString(tl, -1)); n < 2 {
		t.Errorf("timeline says until when a release can be activated %d times, want once per release (2):\n%s", n, tl)
	}
	record("timeline")
	shot("1-timeline")

	// 2. Click into release 2's diff and read the 120 -> 60 change.
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(`#release-2 h2 a`)), chromedp.WaitVisible(chromedp.CSS("table.changes"))); err != nil {
		t.Fatal(err)
	}
	rel := mainText()
	if !regexp.MustCompile(`agentPolicy\.limits\.requestsPerMinute\s*120 → 60`).MatchString(rel) {
		t.Errorf("release 2 page does not show agentPolicy.limits.requestsPerMinute 120 → 60:\n%s", rel)
	}
	for _, want := range []string{"Reviewed commit", "Lower the account agent", "Agent/account on dev.lightapi.net"} {
		if !strings.Contains(rel, want) {
			t.Errorf("release page lacks %q", want)
		}
	}
	// Until when release 2 can be activated, or rolled back to: the
	// demo's releases were compiled minutes ago.
	if !regexp.MustCompile(`Activatable\s*until \d{4}-\d\d-\d\d \d\d:\d\d:\d\dZ`).MatchString(rel) {
		t.Errorf("release 2 page does not say until when it can be activated:\n%s", rel)
	}
	record("release 2")
	shot("2-release-diff")

	// 3. Open the account agent's target page and see its history.
	account := `a[href$="/targets/dev.lightapi.net/com.networknt.agent-account-1.0.0"]`
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(account)), chromedp.WaitVisible(chromedp.ID("history"))); err != nil {
		t.Fatal(err)
	}
	moves, err := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll("tr.move").length`))
	if err != nil {
		t.Fatal(err)
	}
	tg := mainText()
	if moves < 3 || !strings.Contains(tg, "rollback") || !strings.Contains(tg, "promote") || !strings.Contains(tg, "Lease expires") {
		t.Errorf("target page: %d moves, want promote 1, promote 2, rollback; text:\n%s", moves, tg)
	}
	record("target")
	shot("3-target")

	// 4. Time travel to a moment between release 1 and release 2.
	var tlAPI struct {
		Releases []struct {
			Version       int64  `json:"releaseVersion"`
			ReleaseDigest string `json:"releaseDigest"`
		} `json:"releases"`
		Events []struct {
			Release    int64     `json:"releaseVersion"`
			Kind       string    `json:"kind"`
			RecordedAt time.Time `json:"recordedAt"`
		} `json:"events"`
	}
	body := get(t, base+"/api/environments/dev/timeline", 200)
	leaks.add("GET timeline API", body)
	if err := json.Unmarshal([]byte(body), &tlAPI); err != nil {
		t.Fatal(err)
	}
	var p1, p2 time.Time
	for _, e := range tlAPI.Events {
		if e.Kind == "promote" && e.Release == 1 {
			p1 = e.RecordedAt
		}
		if e.Kind == "promote" && e.Release == 2 {
			p2 = e.RecordedAt
		}
	}
	digest1 := ""
	for _, r := range tlAPI.Releases {
		if r.Version == 1 {
			digest1 = r.ReleaseDigest
		}
	}
	if p1.IsZero() || p2.IsZero() || !p1.Before(p2) || digest1 == "" {
		t.Fatalf("timeline API: promote 1 at %v, promote 2 at %v, release 1 digest %q", p1, p2, digest1)
	}
	between := p1.Add(p2.Sub(p1) / 2).UTC().Format(time.RFC3339Nano)
	if err := chromedp.Do(ctx,
		chromedp.Navigate(base+"/env/dev/at"),
		chromedp.WaitVisible(chromedp.ID("t")),
		chromedp.SendKeys(chromedp.ID("t"), between),
		chromedp.Click(chromedp.ID("go")),
		chromedp.WaitVisible(chromedp.ID("answer")),
	); err != nil {
		t.Fatal(err)
	}
	at := mainText()
	if !strings.Contains(at, "Release 1") || !strings.Contains(at, digest1) {
		t.Errorf("time travel to %s does not show release 1 and its digest %s:\n%s", between, digest1, at)
	}
	record("time travel")
	shot("4-time-travel")

	// 5. A promotion made now appears on the open timeline within 2 s, without a reload.
	if err := chromedp.Do(ctx,
		chromedp.Navigate(base+"/env/dev"),
		chromedp.WaitVisible(chromedp.CSS("#release-1.current")),
		chromedp.Func(func(ctx context.Context, t *chromedp.Target) error {
			_, err := chromedp.Poll[bool](`document.getElementById("live").textContent === "live"`, chromedp.WithPollingTimeout(10*time.Second))(ctx, t)
			return err
		}),
		chromedp.Func(func(ctx context.Context, t *chromedp.Target) error {
			_, err := chromedp.Evaluate[bool](`window.noReloadMarker = "still here"; true`)(ctx, t)
			return err
		}),
	); err != nil {
		t.Fatal(err)
	}
	act := exec.Command(bin, "activate", "--database", d.promoterDB, "--env", "dev", "--release", "2",
		"--reason", "e2e: forward activation while the console is open", "--actor", "e2e@example.com",
		"--key", filepath.Join(state, "keys", "cosign.key"))
	act.Env = append(os.Environ(), "COSIGN_PASSWORD=configpub-demo", "PGPASSFILE="+filepath.Join(state, "pgpass"))
	if out, err := act.CombinedOutput(); err != nil {
		t.Fatalf("configpub activate: %v\n%s", err, out)
	}
	activated := time.Now()
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool](`document.querySelector("#release-2.current") !== null`,
		chromedp.WithPollingInterval(50*time.Millisecond), chromedp.WithPollingTimeout(2*time.Second))); err != nil {
		t.Fatalf("release 2 did not become CURRENT on the open page within 2 s of the activation: %v", err)
	}
	marker, err := chromedp.Run(ctx, chromedp.Evaluate[string](`window.noReloadMarker || ""`))
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("live update shown %v after activate returned", time.Since(activated).Round(time.Millisecond))
	if marker != "still here" {
		t.Errorf("the page was reloaded (marker %q)", marker)
	}
	record("timeline after live update")
	shot("5-live-update")

	// 6. Phone width: no horizontal scrolling of the page.
	if err := chromedp.Do(ctx,
		chromedp.EmulateViewport(390, 844, chromedp.EmulateMobile, chromedp.EmulateScale(2)),
		chromedp.Navigate(base+"/env/dev/releases/2"),
		chromedp.WaitVisible(chromedp.CSS("table.changes")),
	); err != nil {
		t.Fatal(err)
	}
	overflow, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`document.documentElement.scrollWidth > window.innerWidth + 1`))
	if err != nil {
		t.Fatal(err)
	}
	if overflow {
		t.Errorf("release page scrolls horizontally at 390 px")
	}
	shot("6-release-phone")
	record("release at phone width")

	// Every other route, fetched too, for the leak check.
	for _, p := range []string{"/", "/api/environments", "/api/environments/dev/releases/2",
		"/api/environments/dev/releases/1", "/env/dev/releases/1",
		"/api/environments/dev/targets/dev.lightapi.net/com.networknt.agent-account-1.0.0",
		"/api/environments/dev/at?t=" + between, "/metrics"} {
		leaks.add("GET "+p, get(t, base+p, 200))
	}
	leaks.check(t)

	// 7. Non-loopback access: a console on all interfaces refuses to start
	// without credentials, and one behind a trusted proxy refuses a direct
	// request from another address without them.
	viewer := strings.Replace(d.promoterDB, "demo_promoter@", "demo_viewer@", 1)
	refuse := exec.Command(bin, "console", "--database", viewer, "--listen", "0.0.0.0:0")
	refuse.Env = append(os.Environ(), "PGPASSFILE="+filepath.Join(state, "pgpass"))
	if out, err := refuse.CombinedOutput(); exitCode(err) != 2 || !strings.Contains(string(out), "needs --jwks or --trusted-proxy") {
		t.Errorf("console on 0.0.0.0 without credentials: exit %d, output %s; want exit 2 naming --jwks/--trusted-proxy", exitCode(err), out)
	}
	ip := nonLoopbackIP()
	if ip == "" {
		t.Log("no non-loopback address on this machine: remote refusal covered by the console package's tests only")
		return
	}
	addr := freeAddr(t)
	_, port, _ := net.SplitHostPort(addr)
	remote := exec.Command(bin, "console", "--database", viewer, "--listen", "0.0.0.0:"+port,
		"--proxy-header", "X-Forwarded-User", "--trusted-proxy", "192.0.2.1")
	remote.Env = append(os.Environ(), "PGPASSFILE="+filepath.Join(state, "pgpass"))
	remote.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := remote.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = remote.Process.Signal(syscall.SIGTERM); _ = remote.Wait() }()
	waitHTTP(t, "http://127.0.0.1:"+port+"/healthz")
	for _, p := range []string{"/", "/env/dev", "/api/environments", "/metrics"} {
		b := get(t, "http://"+net.JoinHostPort(ip, port)+p, http.StatusUnauthorized)
		leaks.add("remote GET "+p, b)
	}
	leaks.check(t)
}

func get(t *testing.T, u string, want int) string {
	t.Helper()
	resp, err := http.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != want {
		t.Errorf("GET %s: %s, want %d", u, resp.Status, want)
	}
	return string(b)
}

func exitCode(err error) int {
	if err == nil {
		return 0
	}
	if ee, ok := err.(*exec.ExitError); ok {
		return ee.ExitCode()
	}
	return -1
}

func nonLoopbackIP() string {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return ""
	}
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && !n.IP.IsLoopback() && n.IP.To4() != nil {
			return n.IP.String()
		}
	}
	return ""
}
