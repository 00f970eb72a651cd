package configserver_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/configpub/configpub/bundle"
	"github.com/configpub/configpub/configserver"
	"github.com/configpub/configpub/configserver/client"
	"github.com/configpub/configpub/internal/signing"
	"github.com/configpub/configpub/internal/simclock"
	"github.com/configpub/configpub/promoter"
)

// TestRenewalOutageIsVisibleBeforeRuntimesFailClosed runs a simulated day
// of lease renewals every five minutes (lease: refresh after 5, expire
// after 15 minutes) with 20 minutes between the renewals of 13:00 and
// 13:20 (the CronJob broken), one minute at a time, and says what an
// operator sees. /readyz stays 200
// all day (the server is healthy: readiness would only drain every
// replica alike). configpub_server_lease_expiry_timestamp_seconds{env}
// says when the environment's first lease ends: the documented alert
// (within 5 minutes) never fires while renewals run, and fires at 13:11,
// four minutes before the lease ends at 13:15 and before any runtime fails
// closed. From 13:15 until renewals resume, GET /configs answers 503
// lease_ended with Retry-After (logged with the lease's end), not 200 with
// a manifest the runtime must refuse: the runtime fails closed once its
// own lease ends (EXPIRED), and reports nothing REJECTED. The first
// renewal after the outage is served and applied at once, and the alert
// clears.
func TestRenewalOutageIsVisibleBeforeRuntimesFailClosed(t *testing.T) {
	t.Parallel()
	values, adv := readGoldenAdvisor(t)
	start := goldenCreatedAt.Truncate(24 * time.Hour).Add(24 * time.Hour) // the next midnight
	clock := simclock.New(start.Add(-10 * time.Minute))                   // activated ten minutes before the day starts
	e := newEnv(t, envOptions{handler: configserver.Options{Clock: clock.Now}})
	ctx := context.Background()
	ps, key := e.openPromoter(t, clock.Now)
	trusted, err := signing.NewTrustedKey(&key.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	id := bundle.Identity{Host: adv.Host, ServiceID: adv.ServiceID, EnvTag: adv.EnvTag}
	tok := e.token(t, id, adv.Audience)
	rt, err := client.New(client.Options{ServerURL: e.srv.URL, Identity: id, Audience: adv.Audience,
		TokenSource: func(context.Context) (string, error) { return tok, nil },
		TrustedKeys: []signing.TrustedKey{trusted}, Clock: clock, CacheDir: t.TempDir(),
		Skew: 30 * time.Second}) // configpub fetch's default --skew
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ps.RecordAndActivate(ctx, promoter.ReleaseInput{CommandID: uuid.NewString(), EnvTag: adv.EnvTag,
		ReleaseVersion: 1, ManifestBytes: []byte("release manifest of the renewal outage test\n"),
		Actor: "ci", Reason: "r", Targets: []promoter.Target{adv.promoterTarget(values)}}); err != nil {
		t.Fatal(err)
	}
	waitAgent(t, e, id, http.StatusOK, adv.SnapshotID)
	if ev, err := rt.Load(ctx); err != nil {
		t.Fatalf("first load: %v (%+v)", err, ev)
	}
	expiresHeader := func() (int, string, *http.Response, []byte) {
		t.Helper()
		resp, body := e.do(t, http.MethodGet, configsPath(id), tok)
		return resp.StatusCode, resp.Header.Get("X-Config-Expires-At"), resp, body
	}
	// renew re-signs the leases and waits (at most a second) until the
	// server serves the new one.
	renew := func() {
		t.Helper()
		_, before, _, _ := expiresHeader()
		if _, err := ps.RenewLeases(ctx, adv.EnvTag); err != nil {
			t.Fatal(err)
		}
		for deadline := time.Now().Add(time.Second); ; time.Sleep(5 * time.Millisecond) {
			if code, after, _, _ := expiresHeader(); code == http.StatusOK && after != before {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: the renewal was not served within a second", clock.Now().Format(time.TimeOnly))
			}
		}
	}
	// leaseLeft is the expiry gauge minus the time: what the alert reads.
	leaseLeft := func() time.Duration {
		t.Helper()
		_, body := e.do(t, http.MethodGet, "/metrics", "")
		parser := expfmt.NewTextParser(model.UTF8Validation)
		families, err := parser.TextToMetricFamilies(strings.NewReader(string(body)))
		if err != nil {
			t.Fatal(err)
		}
		f := families["configpub_server_lease_expiry_timestamp_seconds"]
		if f == nil || len(f.GetMetric()) != 1 || f.GetMetric()[0].GetLabel()[0].GetValue() != adv.EnvTag {
			t.Fatalf("/metrics: configpub_server_lease_expiry_timestamp_seconds %v, want one series for %s", f, adv.EnvTag)
		}
		end := time.Unix(0, int64(f.GetMetric()[0].GetGauge().GetValue()*1e9))
		return end.Sub(clock.Now()).Round(time.Second)
	}
	const alertWithin = 5 * time.Minute
	outage := start.Add(13 * time.Hour)
	leaseEnd := outage.Add(15 * time.Minute)
	var firstAlert time.Time
	// Five-minute steps, one-minute steps around the outage.
	step := func(now time.Time) time.Duration {
		if now.Before(outage.Add(-10*time.Minute)) || !now.Before(outage.Add(30*time.Minute)) {
			return 5 * time.Minute
		}
		return time.Minute
	}
	for now := start; now.Before(start.Add(24 * time.Hour)); now = now.Add(step(now)) {
		m := int(now.Sub(start) / time.Minute)
		clock.Set(now)
		at := now.Format(time.TimeOnly)
		down := now.After(outage) && now.Before(outage.Add(20*time.Minute)) // 13:05 to 13:15 missed
		if m%5 == 0 && !down {
			renew()
		}
		if resp, _ := e.do(t, http.MethodGet, "/readyz", ""); resp.StatusCode != http.StatusOK {
			t.Fatalf("%s: /readyz %d, want 200 all day", at, resp.StatusCode)
		}
		left := leaseLeft()
		alert := left < alertWithin
		if alert && firstAlert.IsZero() {
			firstAlert = now
		}
		code, _, resp, body := expiresHeader()
		ev, err := rt.Load(ctx)
		switch {
		case !down || !now.After(outage.Add(10*time.Minute)):
			if alert || code != http.StatusOK || err != nil {
				t.Fatalf("%s (renewals due or within two missed runs): lease left %s (alert %v), GET %d, runtime %v (%+v); want no alert, 200, a runtime running",
					at, left, alert, code, err, ev)
			}
		case now.Before(leaseEnd):
			if !alert || code != http.StatusOK || err != nil {
				t.Fatalf("%s (lease ends at 13:15): lease left %s (alert %v), GET %d, runtime %v; want the alert firing, 200, a runtime running",
					at, left, alert, code, err)
			}
		default:
			var eb struct{ Error string }
			_ = json.Unmarshal(body, &eb)
			if !alert || code != http.StatusServiceUnavailable || eb.Error != "lease_ended" || resp.Header.Get("Retry-After") == "" {
				t.Fatalf("%s (lease ended at 13:15): lease left %s (alert %v), GET %d %s (Retry-After %q); want the alert firing, 503 lease_ended with Retry-After",
					at, left, alert, code, body, resp.Header.Get("Retry-After"))
			}
			if ev.Outcome == client.OutcomeRejected || !errors.Is(err, client.ErrUnavailable) && !errors.Is(err, client.ErrExpired) {
				t.Fatalf("%s: runtime %v (%+v); want it unavailable, then failed closed EXPIRED, nothing REJECTED", at, err, ev)
			}
			if now.After(leaseEnd.Add(time.Minute)) && !errors.Is(err, client.ErrExpired) {
				t.Fatalf("%s: runtime %v (%+v); want it failed closed once its own lease ended", at, err, ev)
			}
		}
	}
	if want := outage.Add(11 * time.Minute); !firstAlert.Equal(want) {
		t.Errorf("the alert first fired at %s, want %s (four minutes before the lease ends)", firstAlert.Format(time.TimeOnly), want.Format(time.TimeOnly))
	}
	if !strings.Contains(e.logs.String(), "lease ended") {
		t.Errorf("the access log does not say why the answers were 503:\n%.2000s", e.logs.String())
	}
}
