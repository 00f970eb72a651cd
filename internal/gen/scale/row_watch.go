package main

import (
	"context"
	"fmt"
	"time"
)

// maxWatchers caps the watcher step: every watcher is a TCP connection of
// this machine held open on both ends.
const maxWatchers = 10000

// watcherRows runs BenchmarkWatchers of the Config Server: min(targets,
// 10,000) watchers each hold GET /configs?wait= on one server process while
// one activation moves every pointer; COMMIT -> 200 latency and server RSS
// per idle watcher.
func watcherRows(ctx context.Context, s *size) ([]row, error) {
	n := min(s.targets, maxWatchers)
	m, _, err := benchMetrics(ctx, "./configserver/", "BenchmarkWatchers", 20*time.Minute, fmt.Sprintf("-watch.n=%d", n))
	if err != nil {
		return nil, err
	}
	note := ""
	if n < s.targets {
		note = fmt.Sprintf("capped at %d watchers; ", n)
	}
	return []row{
		{figure: "watchers COMMIT->200 p50/p99", value: fmt.Sprintf("%.0f / %.0f ms", m["p50-ms"], m["p99-ms"]),
			note: note + fmt.Sprintf("%d watchers; bar p99 <= 1000 ms", n)},
		{figure: "watchers: server's own notification->answer p99", value: fmt.Sprintf("%.0f ms", m["server-p99-ms"]),
			note: "of the end-to-end p99 above, the part spent in the server"},
		{figure: "server RSS per idle watcher", value: fmt.Sprintf("%.1f KiB", m["rss-KiB/watcher"]), note: "bar <= 16 KiB"},
	}, nil
}
