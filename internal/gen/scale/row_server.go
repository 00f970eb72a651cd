package main

import (
	"context"
	"fmt"
	"time"
)

// serverRows runs BenchmarkServerScale of the Config Server's store: a
// store process holding s.targets current pointers (real signed delivery
// manifests in a private PostgreSQL cluster). Start-up is set against one
// query reading the same rows, RSS against the same process on an empty
// database, and the incremental reconcile (by the commit-ordered
// watermark) against the full reload it replaces.
func serverRows(ctx context.Context, s *size) ([]row, error) {
	m, _, err := benchMetrics(ctx, "./configserver/pgstore/", "BenchmarkServerScale", 30*time.Minute,
		fmt.Sprintf("-scale.identities=%d", s.targets))
	if err != nil {
		return nil, err
	}
	ms := func(v float64) string { return secs(time.Duration(v * float64(time.Millisecond))) }
	return []row{
		{figure: "server start-up (every pointer loaded)", value: secs(time.Duration(m["startup-s"] * float64(time.Second))),
			baseline: secs(time.Duration(m["floor-read-s"]*float64(time.Second))) + " one query reading the rows",
			ratio:    ratio(m["startup-s"], m["floor-read-s"])},
		{figure: "server RSS, loaded", value: fmt.Sprintf("%.0f MiB", m["rss-MiB"]),
			baseline: fmt.Sprintf("%.0f MiB empty store", m["empty-rss-MiB"]), ratio: ratio(m["rss-MiB"], m["empty-rss-MiB"]),
			note: fmt.Sprintf("%.0f B per identity; Go heap %.0f MiB; bar at 100k: 512 MiB", m["rss-B/identity"], m["heap-MiB"])},
		{figure: "server peak RSS (VmHWM)", value: fmt.Sprintf("%.0f MiB", m["peak-rss-MiB"]),
			note: fmt.Sprintf("with GOMEMLIMIT=384MiB: %.0f MiB, start-up %.1f s", m["peak-rss-memlimit-MiB"], m["startup-memlimit-s"])},
		{figure: "reconcile, nothing changed", value: ms(m["catchup-idle-ms"]), baseline: ms(m["full-reconcile-ms"]) + " full reload",
			ratio: ratio(m["catchup-idle-ms"], m["full-reconcile-ms"]), note: "incremental, by the watermark"},
		{figure: "reconcile, every pointer re-signed", value: ms(m["catchup-all-ms"]), baseline: ms(m["full-reconcile-ms"]) + " full reload, unchanged",
			ratio: ratio(m["catchup-all-ms"], m["full-reconcile-ms"])},
	}, nil
}
