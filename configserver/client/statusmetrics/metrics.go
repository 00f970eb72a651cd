// Package statusmetrics exposes a runtime client's status (current,
// last-known-good, last-rejected and candidate snapshot, fail-closed state,
// load outcomes) as Prometheus metrics on a registry the caller provides. It
// is a package of its own so that the runtime library itself stays free of
// the Prometheus client's dependencies.
//
// The metrics, each labelled host, service_id, env_tag and audience:
//
//   - configpub_runtime_snapshot_info (gauge, 1): one series per snapshot
//     the runtime holds, slot current, last_known_good, last_rejected or
//     candidate, with snapshot_id, publication_id, release_version,
//     artifact_digest, policy_digest and reason (the rejection's, for
//     last_rejected);
//   - configpub_runtime_snapshot_loaded_timestamp_seconds (gauge, by slot):
//     when the runtime verified, or rejected, that slot's snapshot;
//   - configpub_runtime_lease_expires_timestamp_seconds (gauge): the end of
//     the current snapshot's signed lease;
//   - configpub_runtime_failed_closed (gauge): 1 while the runtime has no
//     valid configuration;
//   - configpub_runtime_loads_total (counter, by outcome and reason): the
//     loads, as Evidence reports them.
package statusmetrics

import (
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/configpub/configpub/bundle"
	"github.com/configpub/configpub/configserver/client"
)

// Source is what the collector reads: a *client.Client.
type Source interface {
	Status() *bundle.RuntimeStatus
	LoadCounts() map[[2]string]uint64
}

var _ Source = (*client.Client)(nil)

var (
	snapLabels = []string{"host", "service_id", "env_tag", "audience", "slot", "snapshot_id", "publication_id",
		"release_version", "artifact_digest", "policy_digest", "reason"}
	idLabels = []string{"host", "service_id", "env_tag", "audience"}

	infoDesc = prometheus.NewDesc("configpub_runtime_snapshot_info",
		"Snapshots the runtime holds, one series per slot (current, last_known_good, last_rejected, candidate); value 1.",
		snapLabels, nil)
	loadedDesc = prometheus.NewDesc("configpub_runtime_snapshot_loaded_timestamp_seconds",
		"When the runtime verified (or rejected) the snapshot in each slot, by its clock.", append(idLabels, "slot"), nil)
	expiresDesc = prometheus.NewDesc("configpub_runtime_lease_expires_timestamp_seconds",
		"End of the signed lease of the current snapshot.", idLabels, nil)
	failedDesc = prometheus.NewDesc("configpub_runtime_failed_closed",
		"1 when the runtime has no valid configuration (none verified, or its lease ran out).", idLabels, nil)
	loadsDesc = prometheus.NewDesc("configpub_runtime_loads_total",
		"Configuration loads by outcome and reason.", append(idLabels, "outcome", "reason"), nil)
)

// Register adds a collector for src to reg (never the global registry).
func Register(reg prometheus.Registerer, src Source) error {
	if reg == nil {
		return fmt.Errorf("register runtime status metrics: no registry")
	}
	if err := reg.Register(&collector{src: src}); err != nil {
		return fmt.Errorf("register runtime status metrics: %w", err)
	}
	return nil
}

type collector struct{ src Source }

func (c *collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{infoDesc, loadedDesc, expiresDesc, failedDesc, loadsDesc} {
		ch <- d
	}
}

func (c *collector) Collect(ch chan<- prometheus.Metric) {
	st := c.src.Status()
	id := []string{st.Host, st.ServiceID, st.EnvTag, st.Audience}
	for _, s := range []struct {
		slot  string
		state *bundle.SnapshotState
	}{{"current", st.Current}, {"last_known_good", st.LastKnownGood}, {"last_rejected", st.LastRejected}, {"candidate", st.Candidate}} {
		if s.state == nil {
			continue
		}
		x := s.state
		ch <- prometheus.MustNewConstMetric(infoDesc, prometheus.GaugeValue, 1, append(append([]string(nil), id...), s.slot,
			x.SnapshotID, x.PublicationID, fmt.Sprint(x.ReleaseVersion), x.ArtifactDigest, x.PolicyDigest, x.Reason)...)
		if t, err := time.Parse(time.RFC3339Nano, x.LoadedAt); err == nil {
			ch <- prometheus.MustNewConstMetric(loadedDesc, prometheus.GaugeValue, float64(t.UnixNano())/1e9, append(append([]string(nil), id...), s.slot)...)
		}
	}
	if st.Current != nil {
		if t, err := time.Parse(time.RFC3339, st.Current.ExpiresAt); err == nil {
			ch <- prometheus.MustNewConstMetric(expiresDesc, prometheus.GaugeValue, float64(t.Unix()), id...)
		}
	}
	failed := 0.0
	if st.FailedClosed {
		failed = 1
	}
	ch <- prometheus.MustNewConstMetric(failedDesc, prometheus.GaugeValue, failed, id...)
	for k, n := range c.src.LoadCounts() {
		ch <- prometheus.MustNewConstMetric(loadsDesc, prometheus.CounterValue, float64(n), append(append([]string(nil), id...), k[0], k[1])...)
	}
}
