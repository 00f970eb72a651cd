package console

import (
	"context"
	"log/slog"
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/configpub/configpub/internal/dbschema"
	"github.com/configpub/configpub/webhook"
)

// httpMetrics are the console's own request metrics.
type httpMetrics struct {
	requests *prometheus.CounterVec
	duration *prometheus.HistogramVec
}

func newHTTPMetrics(reg *prometheus.Registry, h *hub) *httpMetrics {
	m := &httpMetrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "configpub_console_requests_total",
			Help: "Console HTTP requests by route and status code.",
		}, []string{"route", "code"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "configpub_console_request_duration_seconds",
			Help:    "Console page and API latency by route.",
			Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5},
		}, []string{"route"}),
	}
	reg.MustRegister(m.requests, m.duration, prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "configpub_console_live_clients",
		Help: "Browsers following live updates (server-sent events).",
	}, func() float64 { return float64(h.clients()) }))
	return m
}

type statusWriter struct {
	http.ResponseWriter
	code int
}

func (s *statusWriter) WriteHeader(code int) {
	if s.code == 0 {
		s.code = code
	}
	s.ResponseWriter.WriteHeader(code)
}

func (s *statusWriter) Write(b []byte) (int, error) {
	if s.code == 0 {
		s.code = http.StatusOK
	}
	return s.ResponseWriter.Write(b)
}

func (c *Console) instrument(route string, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		sw := &statusWriter{ResponseWriter: w}
		next.ServeHTTP(sw, r)
		if sw.code == 0 {
			sw.code = http.StatusOK
		}
		c.m.requests.WithLabelValues(route, strconv.Itoa(sw.code)).Inc()
		c.m.duration.WithLabelValues(route).Observe(time.Since(start).Seconds())
	})
}

// Metric descriptions of the publication signals, computed from the
// release store at scrape time.
var (
	descCurrentRelease = prometheus.NewDesc("configpub_environment_current_release",
		"Release version current in the environment.", []string{"env"}, nil)
	descStagedRelease = prometheus.NewDesc("configpub_environment_staged_release",
		"Newest recorded, not yet activated release above the current one (0 = none).", []string{"env"}, nil)
	descTargets = prometheus.NewDesc("configpub_targets",
		"Targets by state (APPLIED, PUBLISHED, REJECTED, LEASE_EXPIRED, REVOKED, RETIRED).", []string{"env", "state"}, nil)
	descLeaseExpiring = prometheus.NewDesc("configpub_lease_expiring_targets",
		"Targets past their lease refresh point or expiring within the lease horizon.", []string{"env"}, nil)
	descDivergence = prometheus.NewDesc("configpub_digest_divergence_targets",
		"Targets whose runtime last reported another snapshot than the current one, or rejected it.", []string{"env"}, nil)
	descAckLag = prometheus.NewDesc("configpub_ack_lag_seconds",
		"Seconds from each current pointer move to the first APPLIED or REJECTED receipt about it read since the move (retired targets left out).", []string{"env"}, nil)
	descUnacked = prometheus.NewDesc("configpub_unacknowledged_targets",
		"Current pointers without an APPLIED or REJECTED receipt about their snapshot read since they moved (retired targets left out).", []string{"env"}, nil)
	descPublicationDuration = prometheus.NewDesc("configpub_publication_duration_seconds",
		"Seconds from a release's record to its first activation.", []string{"env"}, nil)
	descPublicationFailures = prometheus.NewDesc("configpub_publication_failures_total",
		"Release-journal events whose outcome was NOT_APPLIED or INTEGRITY_ERROR, by phase (event kind).",
		[]string{"env", "phase", "outcome"}, nil)
	descUnconfirmed = prometheus.NewDesc("configpub_unconfirmed_releases",
		"Releases whose execution outcome has been UNCONFIRMED for more than two minutes: a command that lost its "+
			"COMMIT's reply or stopped after writing its intent; configpub reconcile settles them.", []string{"env"}, nil)
	descValidationFailures = prometheus.NewDesc("configpub_snapshot_rejections_total",
		"Runtime reports rejecting a snapshot, by audience.", []string{"env", "audience"}, nil)
	descRejectedPublications = prometheus.NewDesc("configpub_rejected_publications",
		"Distinct publications (per audience) a runtime rejected.", []string{"env", "audience"}, nil)
	descRollbacks = prometheus.NewDesc("configpub_rollbacks_total",
		"Rollbacks (release-journal rollback activations).", []string{"env"}, nil)
	descRevocations = prometheus.NewDesc("configpub_revocations_total",
		"Revocation records (snapshots or publications).", nil, nil)
	descTargetRelease = prometheus.NewDesc("configpub_target_current_release",
		"Release of each target's current snapshot (only with per-target metrics on).",
		[]string{"env", "host", "service_id", "audience"}, nil)
	descActivatableUntil = prometheus.NewDesc("configpub_environment_current_release_activatable_until_seconds",
		"Unix time at which the current release's activation window ends (the earliest end of its snapshots' windows): "+
			"after it, a change re-issues the targets whose windows ended and leaves no release to roll back to; renew.",
		[]string{"env"}, nil)
	descWebhookUndelivered = prometheus.NewDesc("configpub_webhook_undelivered_events",
		"Release notifications of the last 7 days, older than 2 minutes (webhook redeliver's default --since and --min-age), that a webhook receiver was sent (or others were, while it was in use) and has neither accepted nor refused for good: what configpub webhook redeliver would send it; receiver \"none\": recorded with their state change and sent to no receiver yet (the process stopped first), which redeliver sends to every receiver.",
		[]string{"receiver"}, nil)
	descScrapeError = prometheus.NewDesc("configpub_console_scrape_errors",
		"1 when the last scrape could not read the release store.", nil, nil)
)

// failurePhases are the release-journal events that settle a command
// NOT_APPLIED or INTEGRITY_ERROR (event kind, outcome), as SQL VALUES rows.
const failurePhases = `('refused-revoked', 'NOT_APPLIED'), ('refused-window', 'NOT_APPLIED'), ('reconcile', 'NOT_APPLIED'),
	('candidate-rejected', 'NOT_APPLIED'), ('integrity-error', 'INTEGRITY_ERROR')`

// ackBuckets are the upper bounds (seconds) of configpub_ack_lag_seconds:
// one second to a day.
var ackBuckets = []float64{1, 5, 15, 30, 60, 300, 900, 3600, 6 * 3600, 86400}

// publicationBuckets are the upper bounds (seconds) of
// configpub_publication_duration_seconds: a release staged (or recorded)
// and activated later may wait days, over a weekend or a freeze window, so
// they run past ackBuckets' day to two weeks.
var publicationBuckets = append(append([]float64{}, ackBuckets...), 2*86400, 4*86400, 7*86400, 14*86400)

// zeroBuckets returns a histogram's bucket counts with every bound of
// bounds at 0: a bound no observation fell under is served as 0, not left
// out.
func zeroBuckets(bounds []float64) map[float64]uint64 {
	m := make(map[float64]uint64, len(bounds))
	for _, b := range bounds {
		m[b] = 0
	}
	return m
}

// publicationCollector reads the publication signals at scrape time.
type publicationCollector struct {
	rd        *reader
	perTarget bool
	logger    *slog.Logger
}

func (p *publicationCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descCurrentRelease, descStagedRelease, descTargets, descLeaseExpiring,
		descDivergence, descAckLag, descUnacked, descPublicationDuration, descPublicationFailures,
		descUnconfirmed, descValidationFailures, descRejectedPublications, descRollbacks, descRevocations, descWebhookUndelivered, descTargetRelease,
		descActivatableUntil, descScrapeError} {
		ch <- d
	}
}

func (p *publicationCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	failed := 0.0
	if err := p.collect(ctx, ch); err != nil {
		p.logger.Warn("console: metrics scrape failed", "err", err)
		failed = 1
	}
	ch <- prometheus.MustNewConstMetric(descScrapeError, prometheus.GaugeValue, failed)
}

func (p *publicationCollector) collect(ctx context.Context, ch chan<- prometheus.Metric) error {
	envs, err := p.rd.Environments(ctx)
	if err != nil {
		return err
	}
	for _, e := range envs {
		ch <- prometheus.MustNewConstMetric(descCurrentRelease, prometheus.GaugeValue, float64(e.CurrentRelease), e.EnvTag)
		ch <- prometheus.MustNewConstMetric(descStagedRelease, prometheus.GaugeValue, float64(e.StagedRelease), e.EnvTag)
		for _, s := range stateOrder {
			n := 0
			for _, sc := range e.ByState {
				if sc.State == s {
					n = sc.Count
				}
			}
			ch <- prometheus.MustNewConstMetric(descTargets, prometheus.GaugeValue, float64(n), e.EnvTag, s)
		}
		ch <- prometheus.MustNewConstMetric(descLeaseExpiring, prometheus.GaugeValue, float64(e.LeasesExpiring), e.EnvTag)
		ch <- prometheus.MustNewConstMetric(descDivergence, prometheus.GaugeValue, float64(e.Divergent), e.EnvTag)
	}
	q := p.rd.q
	if err := p.activatableUntil(ctx, ch); err != nil {
		return err
	}
	// Acknowledgement lag of current pointers: only a receipt read since
	// the move acknowledges it (as status counts them). A retired pointer
	// (its target removed by a release) is no one's to acknowledge.
	rows, err := q.Query(ctx, `SELECT p.env_tag, extract(epoch FROM (
			SELECT min(e.reported_at) FROM configpub.runtime_evidence e
			WHERE e.env_tag = p.env_tag AND e.host = p.host AND e.service_id = p.service_id
				AND e.snapshot_id = p.snapshot_id AND e.outcome IN ('APPLIED', 'REJECTED') AND `+p.rd.receiptsOnly("e")+`
				AND e.reported_at >= p.moved_at) - p.moved_at)::float8
		FROM configpub.current_pointer p WHERE `+p.rd.retiredAtCol("p")+` IS NULL ORDER BY 1`)
	if err != nil {
		return err
	}
	type hist struct {
		count   uint64
		sum     float64
		buckets map[float64]uint64
		unacked int
	}
	lags := map[string]*hist{}
	for rows.Next() {
		var env string
		var lag *float64
		if err := rows.Scan(&env, &lag); err != nil {
			rows.Close()
			return err
		}
		h := lags[env]
		if h == nil {
			h = &hist{buckets: zeroBuckets(ackBuckets)}
			lags[env] = h
		}
		if lag == nil {
			h.unacked++
			continue
		}
		v := max(*lag, 0)
		h.count++
		h.sum += v
		for _, b := range ackBuckets {
			if v <= b {
				h.buckets[b]++
			}
		}
	}
	if err := rows.Err(); err != nil {
		return err
	}
	for env, h := range lags {
		ch <- prometheus.MustNewConstHistogram(descAckLag, h.count, h.sum, h.buckets, env)
		ch <- prometheus.MustNewConstMetric(descUnacked, prometheus.GaugeValue, float64(h.unacked), env)
	}
	// Publication duration: record to first activation.
	rows, err = q.Query(ctx, `SELECT r.env_tag, extract(epoch FROM (min(j.recorded_at) - r.created_at))::float8
		FROM configpub.config_release r JOIN configpub.config_release_journal j
			ON j.env_tag = r.env_tag AND j.release_version = r.release_version AND j.to_state = 'ACTIVE'
		GROUP BY r.env_tag, r.release_version, r.created_at ORDER BY 1`)
	if err != nil {
		return err
	}
	durs := map[string]*hist{}
	for rows.Next() {
		var env string
		var d float64
		if err := rows.Scan(&env, &d); err != nil {
			rows.Close()
			return err
		}
		h := durs[env]
		if h == nil {
			h = &hist{buckets: zeroBuckets(publicationBuckets)}
			durs[env] = h
		}
		d = max(d, 0)
		h.count++
		h.sum += d
		for _, b := range publicationBuckets {
			if d <= b {
				h.buckets[b]++
			}
		}
	}
	if err := rows.Err(); err != nil {
		return err
	}
	for env, h := range durs {
		ch <- prometheus.MustNewConstHistogram(descPublicationDuration, h.count, h.sum, h.buckets, env)
	}
	// Every command journals its intent UNCONFIRMED before its transaction
	// (a write-ahead record the same command settles), so an UNCONFIRMED
	// event is no failure; one left so is (configpub_unconfirmed_releases).
	// Every environment has a series, at 0, for each way a command fails
	// (failurePhases), so that increase() sees the first failure: a series
	// born at 1 shows no increase.
	if err := counts(ctx, q, ch, descPublicationFailures, `SELECT e.env_tag, k.phase, k.outcome, count(j.event_id)
		FROM (SELECT DISTINCT env_tag FROM configpub.config_release) e
		CROSS JOIN (VALUES `+failurePhases+`) k (phase, outcome)
		LEFT JOIN configpub.config_release_journal j ON j.env_tag = e.env_tag AND j.event_kind = k.phase AND j.to_outcome = k.outcome
		GROUP BY 1, 2, 3
		UNION ALL
		SELECT env_tag, event_kind, to_outcome, count(*)
		FROM configpub.config_release_journal WHERE to_outcome IN ('NOT_APPLIED', 'INTEGRITY_ERROR')
			AND (event_kind, to_outcome) NOT IN (VALUES `+failurePhases+`)
		GROUP BY 1, 2, 3`, prometheus.CounterValue); err != nil {
		return err
	}
	if err := counts(ctx, q, ch, descUnconfirmed, `SELECT env_tag, count(*) FILTER (WHERE execution_outcome = 'UNCONFIRMED'
			AND updated_at < now() - interval '2 minutes')
		FROM configpub.config_release GROUP BY 1`, prometheus.GaugeValue); err != nil {
		return err
	}
	// At 0 for every environment and audience, for the same reason.
	if err := counts(ctx, q, ch, descValidationFailures, `SELECT env_tag, audience, sum(n)::bigint FROM (
			SELECT e.env_tag, coalesce(s.audience, 'unknown') AS audience, count(*) AS n
			FROM configpub.runtime_evidence e LEFT JOIN configpub.config_snapshot s ON s.snapshot_id = e.snapshot_id
			WHERE e.outcome = 'REJECTED' GROUP BY 1, 2
			UNION ALL
			SELECT r.env_tag, a.audience, 0 FROM (SELECT DISTINCT env_tag FROM configpub.config_release) r
			CROSS JOIN (VALUES ('agent'), ('gateway'), ('knowledge')) a (audience)) x
		GROUP BY 1, 2`, prometheus.CounterValue); err != nil {
		return err
	}
	if err := counts(ctx, q, ch, descRejectedPublications, `SELECT e.env_tag, s.audience, count(DISTINCT s.publication_id)
		FROM configpub.runtime_evidence e JOIN configpub.config_snapshot s ON s.snapshot_id = e.snapshot_id
		WHERE e.outcome = 'REJECTED' GROUP BY 1, 2`, prometheus.GaugeValue); err != nil {
		return err
	}
	if err := counts(ctx, q, ch, descRollbacks, `SELECT r.env_tag, count(j.event_id)
		FROM (SELECT DISTINCT env_tag FROM configpub.config_release) r
		LEFT JOIN configpub.config_release_journal j ON j.env_tag = r.env_tag AND j.event_kind = 'rollback'
		GROUP BY 1`, prometheus.CounterValue); err != nil {
		return err
	}
	if err := counts(ctx, q, ch, descRevocations, `SELECT count(*) FROM configpub.revocation`, prometheus.CounterValue); err != nil {
		return err
	}
	// What webhook redeliver would send with its default --since and
	// --min-age (webhook.RedeliverWindow, webhook.RedeliverMinAge), by the
	// one statement it reads (dbschema.UndeliveredEventsSQL): per
	// receiver, and the events sent to none (every receiver's) under
	// receiver "none".
	now := p.rd.now()
	if err := counts(ctx, q, ch, descWebhookUndelivered, `SELECT coalesce(o.receiver, 'none'), count(*)
		FROM (`+dbschema.UndeliveredEventsSQL+`) o GROUP BY 1`, prometheus.GaugeValue,
		nil, now.Add(-webhook.RedeliverWindow), now.Add(-webhook.RedeliverMinAge)); err != nil {
		return err
	}
	if p.perTarget {
		if err := counts(ctx, q, ch, descTargetRelease, `SELECT p.env_tag, p.host, p.service_id, s.audience, s.release_version
			FROM configpub.current_pointer p JOIN configpub.config_snapshot s ON s.snapshot_id = p.snapshot_id`,
			prometheus.GaugeValue); err != nil {
			return err
		}
	}
	return nil
}

// counts emits one metric per row: the label values, then the value.
func counts(ctx context.Context, q querier, ch chan<- prometheus.Metric, d *prometheus.Desc, sql string, vt prometheus.ValueType, args ...any) error {
	rows, err := q.Query(ctx, sql, args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		vals, err := rows.Values()
		if err != nil {
			return err
		}
		labels := make([]string, 0, len(vals)-1)
		for _, v := range vals[:len(vals)-1] {
			s, _ := v.(string)
			labels = append(labels, s)
		}
		var f float64
		switch n := vals[len(vals)-1].(type) {
		case int64:
			f = float64(n)
		case int32:
			f = float64(n)
		case float64:
			f = n
		}
		ch <- prometheus.MustNewConstMetric(d, vt, f, labels...)
	}
	return rows.Err()
}

// activatableUntil reports when each environment's current release stops
// being activatable, kept with its summary (databases before that: none).
func (p *publicationCollector) activatableUntil(ctx context.Context, ch chan<- prometheus.Metric) error {
	if !p.rd.f.window {
		return nil
	}
	rows, err := p.rd.q.Query(ctx, `SELECT e.env_tag, extract(epoch FROM x.activatable_until)::float8
		FROM configpub.environment e JOIN configpub.release_target_summary x
			ON x.env_tag = e.env_tag AND x.release_version = e.current_release_version
		WHERE x.activatable_until IS NOT NULL ORDER BY 1`)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var env string
		var until float64
		if err := rows.Scan(&env, &until); err != nil {
			return err
		}
		ch <- prometheus.MustNewConstMetric(descActivatableUntil, prometheus.GaugeValue, until, env)
	}
	return rows.Err()
}
