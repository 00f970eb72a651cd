package demo

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/configpub/configpub/bundle"
	"github.com/configpub/configpub/internal/digest"
)

// runtime is one simulated workload: a `configpub fetch` sidecar with its
// own token, trust key, last-known-good cache and output file.
type runtime struct {
	audience string
	target   bundle.TargetEntry
	token    string // token file
	cache    string
	out      string
}

// evidence is the part of `configpub fetch`'s JSON evidence the demo shows.
type evidence struct {
	Outcome           string `json:"outcome"`
	Reason            string `json:"reason"`
	Field             string `json:"field"`
	Detail            string `json:"detail"`
	SnapshotID        string `json:"snapshotId"`
	ReleaseVersion    int64  `json:"releaseVersion"`
	ArtifactDigest    string `json:"artifactDigest"`
	CurrentSnapshotID string `json:"currentSnapshotId"`
}

// runtimes picks one target per audience from release 1 and mints each a
// workload token bound to its identity.
func (d *demo) runtimes(ctx context.Context) ([]*runtime, error) {
	if d.rts != nil {
		return d.rts, nil
	}
	seen := map[string]bool{}
	for _, t := range d.release1.Targets {
		if seen[t.Audience] {
			continue
		}
		seen[t.Audience] = true
		rt := &runtime{
			audience: t.Audience,
			target:   t,
			token:    d.path("runtimes", t.Audience, "token.jwt"),
			cache:    d.path("runtimes", t.Audience, "cache"),
			out:      d.path("runtimes", t.Audience, "values.yml"),
		}
		if err := os.MkdirAll(filepath.Dir(rt.token), 0o700); err != nil {
			return nil, err
		}
		tok, err := d.p.runQuiet(ctx, false, "token", "--key", d.path("jwt", "signing-key.pem"),
			"--issuer", issuer, "--audience", tokenAudience, "--host", t.Host, "--service-id", t.ServiceID,
			"--env", d.env, "--config-audience", t.Audience, "--ttl", "2h")
		if err != nil {
			return nil, err
		}
		if err := os.WriteFile(rt.token, bytes.TrimSpace(tok), 0o600); err != nil {
			return nil, err
		}
		d.rts = append(d.rts, rt)
	}
	return d.rts, nil
}

// fetch runs one `configpub fetch` against server and decodes its evidence.
func (d *demo) fetch(ctx context.Context, rt *runtime, server string) (*evidence, error) {
	out, err := d.p.runQuiet(ctx, false, "fetch", "--server", server, "--token-file", rt.token,
		"--host", rt.target.Host, "--service-id", rt.target.ServiceID, "--env", d.env,
		"--config-audience", rt.audience, "--trust-key", d.path("keys", "cosign.pub"),
		"--cache-dir", rt.cache, "--out", rt.out, "--report")
	var ev evidence
	if jerr := json.Unmarshal(bytes.TrimSpace(out), &ev); jerr != nil {
		if err != nil {
			return nil, err
		}
		return nil, fmt.Errorf("demo: fetch printed no evidence: %w", jerr)
	}
	return &ev, err
}

// fetchRetrying fetches from the Config Server, retrying a few times when
// the server was unavailable (a 503 on a busy machine), as a runtime's watch
// loop would with its back-off.
func (d *demo) fetchRetrying(ctx context.Context, rt *runtime) (*evidence, error) {
	for attempt := 1; ; attempt++ {
		ev, err := d.fetch(ctx, rt, d.srvURL)
		if ev == nil || ev.Outcome != "UNAVAILABLE" || attempt == 5 {
			return ev, err
		}
		d.say("%s runtime: server unavailable (%s); retrying in %ds", rt.audience, ev.Reason, attempt)
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(time.Duration(attempt) * time.Second):
		}
	}
}

func (d *demo) runRuntimes(ctx context.Context, title string, release int64) error {
	d.title(title)
	want := d.release1
	if release != 1 {
		m, err := d.manifest()
		if err != nil {
			return err
		}
		want = m
	}
	rts, err := d.runtimes(ctx)
	if err != nil {
		return err
	}
	for _, rt := range rts {
		ev, err := d.fetchRetrying(ctx, rt)
		if err != nil {
			return err
		}
		wt := want.Target(rt.target.Host, rt.target.ServiceID)
		if wt == nil {
			return fmt.Errorf("demo: %s is not in release %d", rt.target.ServiceID, want.ReleaseVersion)
		}
		got, err := fileDigest(rt.out)
		if err != nil {
			return err
		}
		if got != wt.ArtifactDigest {
			return fmt.Errorf("demo: %s runtime holds %s, release %d says %s", rt.audience, got, want.ReleaseVersion, wt.ArtifactDigest)
		}
		d.say("%-9s %-40s %-9s snapshot r%d %s  artifact %s = releases/%s.yaml r%d ✓",
			rt.audience, rt.target.ServiceID, ev.Outcome, wt.ReleaseVersion, short(ev.CurrentSnapshotID), short(got), d.env, want.ReleaseVersion)
	}
	return nil
}

func (d *demo) secondChange(ctx context.Context) error {
	d.title("A second pull request lowers the account Agent's request rate; compile and plan it")
	if err := d.repo.branch("policy/account-limits"); err != nil {
		return err
	}
	p := d.path("policy", "agents", "account.yaml")
	b, err := os.ReadFile(p)
	if err != nil {
		return err
	}
	changed := strings.Replace(string(b), "requestsPerMinute: 120", "requestsPerMinute: 60", 1)
	if changed == string(b) {
		return fmt.Errorf("demo: %s has no requestsPerMinute: 120 to change", p)
	}
	if err := os.WriteFile(p, []byte(changed), 0o644); err != nil {
		return err
	}
	d.say("agents/account.yaml: spec.limits.requestsPerMinute 120 -> 60")
	if _, err := d.p.run(ctx, "compile", "--repo", d.path("policy"), "--env", d.env); err != nil {
		return err
	}
	if _, err := d.p.run(ctx, "plan", "--repo", d.path("policy"), "--env", d.env, "--base-ref", "main"); err != nil {
		return err
	}
	now := time.Now().UTC().Truncate(time.Second)
	if _, err := d.repo.commit("Lower the account agent's request rate", now); err != nil {
		return err
	}
	if _, err := d.repo.merge("policy/account-limits", 2, "Lower the account agent's request rate", now.Add(time.Second)); err != nil {
		return err
	}
	d.say("merged as PR #2 with a Reviewed-by trailer")
	return nil
}

func (d *demo) tamper(ctx context.Context) error {
	d.title("A man in the middle flips one byte of a served values.yml: the runtime rejects it")
	proxy, err := startTamperProxy(d.srvURL)
	if err != nil {
		return err
	}
	d.proxy = proxy
	rts, err := d.runtimes(ctx)
	if err != nil {
		return err
	}
	rt := rts[0]
	before, err := os.ReadFile(rt.out)
	if err != nil {
		return err
	}
	ev, err := d.fetch(ctx, rt, proxy.url)
	if err == nil || exitCode(err) != 1 {
		return fmt.Errorf("demo: fetch through the tampering proxy: want exit 1 (rejected), got %v", err)
	}
	if ev.Outcome != "REJECTED" {
		return fmt.Errorf("demo: tampered response: want REJECTED, got %s", ev.Outcome)
	}
	after, err := os.ReadFile(rt.out)
	if err != nil {
		return err
	}
	if !bytes.Equal(before, after) {
		return fmt.Errorf("demo: the last-known-good file changed after a rejected response")
	}
	d.say("%s runtime: %s (%s) — %s", rt.audience, ev.Outcome, ev.Reason, ev.Detail)
	d.say("last-known-good kept: %s still holds %s (snapshot %s)", rel(rt.out), short(digestOf(after)), short(ev.CurrentSnapshotID))
	return nil
}

func fileDigest(p string) (string, error) {
	b, err := os.ReadFile(p)
	if err != nil {
		return "", err
	}
	return digestOf(b), nil
}

func digestOf(b []byte) string { return digest.FromBytes(b).String() }

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("demo: pick a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
