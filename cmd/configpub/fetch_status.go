package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/configpub/configpub/bundle"
	"github.com/configpub/configpub/configserver/client"
	"github.com/configpub/configpub/configserver/client/statusmetrics"
	"github.com/configpub/configpub/internal/signing"
)

// statusFlags are fetch's runtime status endpoint flags.
type statusFlags struct {
	listen     string
	controlPub string
	anonymous  bool
}

func (s statusFlags) validate(watch bool) error {
	switch {
	case s.listen == "" && (s.controlPub != "" || s.anonymous):
		return errors.New("--control-pub and --status-anonymous need --status-listen")
	case s.listen != "" && !watch:
		return errors.New("--status-listen needs --watch")
	case s.listen != "" && s.controlPub == "":
		return errors.New("--status-listen needs --control-pub (the control plane's public key)")
	}
	return nil
}

// serveStatus serves c's status endpoint (/status, /reload) and /metrics on
// s.listen until ctx ends. A reload runs handle like a watched load; out
// says what --out holds (client.StatusOptions.Running), which both the
// status and /metrics report.
func (s statusFlags) serveStatus(ctx context.Context, c *client.Client, handle func(*client.Evidence), out *outState, errOut io.Writer) (func(), error) {
	pem, err := os.ReadFile(s.controlPub)
	if err != nil {
		return nil, fmt.Errorf("read control key: %w", err)
	}
	keys, err := signing.ParsePublicKeys(pem)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", s.controlPub, err)
	}
	h, err := c.StatusHandler(client.StatusOptions{ControlKeys: keys, AnonymousStatus: s.anonymous,
		AfterReload: func(_ context.Context, ev *client.Evidence, _ error) { handle(ev) }, Running: out.running})
	if err != nil {
		return nil, err
	}
	reg := prometheus.NewRegistry()
	if err := statusmetrics.Register(reg, sidecarStatus{c: c, out: out}); err != nil {
		return nil, err
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	mux.Handle("/", h)
	ln, err := net.Listen("tcp", s.listen)
	if err != nil {
		return nil, fmt.Errorf("--status-listen: %w", err)
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second, ReadTimeout: 30 * time.Second,
		WriteTimeout: 2 * time.Minute, MaxHeaderBytes: 16 << 10}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			fmt.Fprintln(errOut, "configpub fetch: status endpoint:", err)
		}
	}()
	fmt.Fprintln(errOut, "configpub fetch: status endpoint on", ln.Addr())
	return func() {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
		<-done
	}, nil
}

// sidecarStatus is what the sidecar's /metrics reads: the client's status
// as its runtime sees it — what --out holds is current and last-known-good
// (client.Client.RunningStatus), not what the client holds in memory or
// persisted — and its loads, with every write of --out that failed counted
// as REJECTED OUT_UNWRITABLE besides the load that verified the snapshot.
type sidecarStatus struct {
	c   *client.Client
	out *outState
}

var _ statusmetrics.Source = sidecarStatus{}

// Status implements statusmetrics.Source.
func (s sidecarStatus) Status() *bundle.RuntimeStatus { return s.c.RunningStatus(s.out.running) }

// LoadCounts implements statusmetrics.Source.
func (s sidecarStatus) LoadCounts() map[[2]string]uint64 {
	n := s.c.LoadCounts()
	if f := s.out.failedWrites(); f > 0 {
		n[[2]string{string(client.OutcomeRejected), string(client.ReasonOutUnwritable)}] += f
	}
	return n
}
