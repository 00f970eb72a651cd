package configserver

import (
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// metrics are the server's Prometheus collectors.
type metrics struct {
	requests *prometheus.CounterVec
	duration *prometheus.HistogramVec
	watchers prometheus.Gauge
}

func newMetrics(reg *prometheus.Registry, store Store, verifier Verifier) *metrics {
	m := &metrics{
		requests: register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "configpub_server_requests_total",
			Help: "HTTP requests by route and status code.",
		}, []string{"route", "code"})),
		duration: register(reg, prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "configpub_server_request_duration_seconds",
			Help: "HTTP request latency by route; route watch: how long a GET /configs?wait= was held.",
			// Up to the longest hold (DefaultMaxWait): a held watch
			// would otherwise be counted only in +Inf.
			Buckets: []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120, 300},
		}, []string{"route"})),
		watchers: register(reg, prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "configpub_server_watchers",
			Help: "GET /configs?wait= requests held until their identity changes.",
		})),
	}
	if sr, ok := store.(StatsReporter); ok {
		register(reg, &storeCollector{store: sr})
	}
	if cs, ok := verifier.(tokenCacheStats); ok {
		register(reg, prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "configpub_server_token_cache_hits_total",
			Help: "Bearer tokens answered from the verified-token cache.",
		}, func() float64 { h, _ := cs.CacheStats(); return float64(h) }))
		register(reg, prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "configpub_server_token_verifications_total",
			Help: "Bearer tokens that needed a full signature verification.",
		}, func() float64 { _, v := cs.CacheStats(); return float64(v) }))
	}
	return m
}

// tokenCacheStats is implemented by *auth.Verifier.
type tokenCacheStats interface {
	CacheStats() (hits, verifications uint64)
}

// register adds c to reg, or returns the equivalent collector already there.
func register[C prometheus.Collector](reg *prometheus.Registry, c C) C {
	if err := reg.Register(c); err != nil {
		var are prometheus.AlreadyRegisteredError
		if errors.As(err, &are) {
			if existing, ok := are.ExistingCollector.(C); ok {
				return existing
			}
		}
	}
	return c
}

func (m *metrics) observe(route string, status int, d time.Duration) {
	m.requests.WithLabelValues(route, statusLabel(status)).Inc()
	m.duration.WithLabelValues(route).Observe(d.Seconds())
}

func metricsHandler(reg *prometheus.Registry) http.Handler {
	return promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg})
}

var (
	descCacheHits = prometheus.NewDesc("configpub_server_artifact_cache_hits_total",
		"Artifact bytes served from the in-memory cache.", nil, nil)
	descCacheMisses = prometheus.NewDesc("configpub_server_artifact_cache_misses_total",
		"Artifact bytes read from the database.", nil, nil)
	descCacheBytes = prometheus.NewDesc("configpub_server_artifact_cache_bytes",
		"Bytes held in the artifact cache.", nil, nil)
	descDBErrors = prometheus.NewDesc("configpub_server_database_errors_total",
		"Database operations that failed.", nil, nil)
	descRefreshes = prometheus.NewDesc("configpub_server_pointer_refreshes_total",
		"Current pointers reloaded after a NOTIFY.", nil, nil)
	descReconciles = prometheus.NewDesc("configpub_server_pointer_reconciles_total",
		"Full reloads of every current pointer.", nil, nil)
	descPointers = prometheus.NewDesc("configpub_server_pointers",
		"Current pointers held in memory.", nil, nil)
	descLag = prometheus.NewDesc("configpub_server_pointer_refresh_lag_seconds",
		"Seconds since the in-memory pointers were last confirmed current.", nil, nil)
	descLeaseExpiry = prometheus.NewDesc("configpub_server_lease_expiry_timestamp_seconds",
		"Earliest end (Unix time) of the delivery leases of the environment's current pointers held in memory: when its first runtime fails closed unless a lease renewal comes first. A pointer whose lease ended is answered 503 lease_ended.",
		[]string{"env"}, nil)
	descReplicaLag = prometheus.NewDesc("configpub_server_replica_lag_seconds",
		"How far behind its primary the hot standby the server reads is: since the oldest WAL it received and has not replayed arrived, or since it lost its WAL receiver (0 on a primary).", nil, nil)
)

// storeCollector reads StoreStats at scrape time.
type storeCollector struct{ store StatsReporter }

func (c *storeCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descCacheHits, descCacheMisses, descCacheBytes, descDBErrors, descRefreshes, descReconciles, descPointers, descLag, descReplicaLag, descLeaseExpiry} {
		ch <- d
	}
}

func (c *storeCollector) Collect(ch chan<- prometheus.Metric) {
	s := c.store.Stats()
	ch <- prometheus.MustNewConstMetric(descCacheHits, prometheus.CounterValue, float64(s.ArtifactCacheHits))
	ch <- prometheus.MustNewConstMetric(descCacheMisses, prometheus.CounterValue, float64(s.ArtifactCacheMisses))
	ch <- prometheus.MustNewConstMetric(descCacheBytes, prometheus.GaugeValue, float64(s.ArtifactCacheBytes))
	ch <- prometheus.MustNewConstMetric(descDBErrors, prometheus.CounterValue, float64(s.DatabaseErrors))
	ch <- prometheus.MustNewConstMetric(descRefreshes, prometheus.CounterValue, float64(s.PointerRefreshes))
	ch <- prometheus.MustNewConstMetric(descReconciles, prometheus.CounterValue, float64(s.Reconciles))
	ch <- prometheus.MustNewConstMetric(descPointers, prometheus.GaugeValue, float64(s.Pointers))
	lag := 0.0
	if !s.LastConfirmed.IsZero() {
		lag = time.Since(s.LastConfirmed).Seconds()
	}
	ch <- prometheus.MustNewConstMetric(descLag, prometheus.GaugeValue, lag)
	ch <- prometheus.MustNewConstMetric(descReplicaLag, prometheus.GaugeValue, s.ReplicaLag.Seconds())
	for env, end := range s.LeaseEnds {
		ch <- prometheus.MustNewConstMetric(descLeaseExpiry, prometheus.GaugeValue, float64(end.UnixNano())/1e9, env)
	}
}

// statusLabel avoids formatting the common status codes per request.
func statusLabel(status int) string {
	switch status {
	case 200:
		return "200"
	case 204:
		return "204"
	case 304:
		return "304"
	case 400:
		return "400"
	case 401:
		return "401"
	case 403:
		return "403"
	case 404:
		return "404"
	case 503:
		return "503"
	}
	return strconv.Itoa(status)
}
