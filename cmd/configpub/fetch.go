package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/configpub/configpub/bundle"
	"github.com/configpub/configpub/configserver/client"
	"github.com/configpub/configpub/configserver/client/ocipull"
	"github.com/configpub/configpub/configserver/tlsfiles"
	"github.com/configpub/configpub/internal/atomicfile"
	"github.com/configpub/configpub/internal/reloadhook"
	"github.com/configpub/configpub/internal/signing"
	"github.com/configpub/configpub/registry"
)

// fetchFlags are the flags of `configpub fetch`.
type fetchFlags struct {
	rf        registryFlags
	server    string
	tokenFile string
	identity  bundle.Identity
	audience  string
	trustKey  string
	cacheDir  string
	out       string
	watch     bool
	interval  time.Duration
	skew      time.Duration
	oci       string
	report    bool
	status    statusFlags
	handleMu  *sync.Mutex // serializes handle between the watch loop and reload requests
	exec      string
	signal    string
	hook      *reloadhook.Hook // built from exec and signal by runFetch
	outSt     *outState        // what --out holds, for the status endpoint; set by runFetch
	// TLS files for the Config Server connection, read again as they are
	// renewed: the CA bundle its certificate chains to, and the client
	// certificate and key for mTLS.
	tlsCA, tlsCert, tlsKey string
}

func addFetchCmd(root *cobra.Command) {
	var f fetchFlags
	cmd := &cobra.Command{
		Use:   "fetch --server URL --token-file F --host H --service-id S --env E --config-audience A --trust-key cosign.pub --cache-dir DIR --out FILE",
		Short: "Fetch, verify and write a runtime's values.yml (sidecar for runtimes in other languages)",
		Long: `fetch runs the runtime client: it fetches GET /configs (or, with --oci,
pulls REF@DIGEST from an OCI registry, checks its cosign signature and reads the signed
delivery manifests attached to it as referrers — plus, with --server, the Config
Server's current one — and applies the artifact only with one that passes), verifies the
signed delivery manifest before reading the body, every digest before parsing it, the
strict YAML, the envelope identity, the lease, the activation window and the replay and
revocation-epoch rules, keeps a re-verified last-known-good and the seen-state in
--cache-dir, and writes the verified values.yml to --out atomically (the temporary files
a killed fetch left beside --out are removed when it starts). It follows no redirect. Each load's evidence is printed as one JSON line.

Exit status: 0 applied or unchanged — a lease renewal of the snapshot --out holds included
when --cache-dir could not be updated (read-only or full: a warning on stderr; the
seen-state already holds its sequence and epoch); 1 rejected or server unavailable (the
last-known-good is kept and --out still holds it), the seen-state or last-known-good could
not be persisted for anything else (a move, an epoch raise), or --out could not be written (REJECTED OUT_UNWRITABLE, printed and reported:
the status endpoint reports what --out holds; the load that writes it reports APPLIED)
while it still holds a file; 3 failed closed (no valid configuration: the lease ran out
or none was ever verified, and --out is removed so nothing unverified stays usable; or
--out could not be written and holds nothing).
With --watch it keeps the file current until interrupted and exits 0. Started before
--token-file exists (a projected token, a Vault agent's sink), it waits for the file: it
says so once on stderr, runs on the last-known-good in --cache-dir (or reports failing
closed), checks again with back-off up to 5s apart, and loads as soon as it appears
(never past the last-known-good's lease). Each request asks the
server to hold it until the pointer moves (wait=, up to --interval), so a move is applied
within about a second of its commit; a server that does not hold requests is polled every
--interval with jitter (jittered back-off on failure). It reads --trust-key again every
--interval: when the file names other keys, the client starts again over --cache-dir with
them, as a restart would (a key added is trusted; what a removed key signed, the
last-known-good included, is not); a file that cannot be read keeps the keys in use.
--control-pub is read again as often (a changed control key starts the status endpoint again).
A reload hook tells a runtime in any language that --out changed: --exec CMD runs CMD with
/bin/sh -c and CONFIGPUB_EVENT (applied or removed), CONFIGPUB_FILE, CONFIGPUB_SNAPSHOT_ID,
CONFIGPUB_PUBLICATION_ID, CONFIGPUB_ARTIFACT_DIGEST and CONFIGPUB_RELEASE_VERSION in its
environment; --signal PID[:SIGNAL] sends SIGNAL (default HUP) to PID. The hook runs after
each write of a changed --out and after its removal when failing closed, never for an
unchanged load or a renewed lease; a failing hook is reported (exit 1 without --watch).
With --tls-ca the Config Server's certificate must chain to that bundle; --tls-cert and
--tls-key present a client certificate (mTLS, and the certificate a cert-bound token names).
Before a request, at most once a minute, the three files are read again, so renewed
certificates are used without a restart; a renewal read half-way keeps the set in use.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return runFetch(cmd, f) },
	}
	fl := cmd.Flags()
	f.rf.add(cmd)
	fl.StringVar(&f.server, "server", "", "Config Server base URL (required unless --oci)")
	fl.StringVar(&f.tokenFile, "token-file", "", "file holding the bearer JWT, re-read on every request (required with --server)")
	fl.StringVar(&f.identity.Host, "host", "", "runtime host (required)")
	fl.StringVar(&f.identity.ServiceID, "service-id", "", "runtime serviceId (required)")
	fl.StringVar(&f.identity.EnvTag, "env-tag", "", "runtime envTag (required)")
	fl.StringVar(&f.audience, "audience", "", "agent, gateway or knowledge (required)")
	fl.StringVar(&f.trustKey, "trust-key", "", "cosign.pub with the trusted manifest key(s); several PEM blocks for rotation (required)")
	fl.StringVar(&f.cacheDir, "cache-dir", "", "directory for the last-known-good and seen-state files (required)")
	fl.StringVar(&f.out, "out", "", "where the verified values.yml is written atomically (required)")
	fl.BoolVar(&f.watch, "watch", false, "keep the file current until interrupted (held requests, or polling)")
	fl.DurationVar(&f.interval, "interval", time.Minute, "with --watch: longest hold of one request, or the polling interval; --trust-key is read again as often")
	fl.StringVar(&f.tlsCA, "tls-ca", "", "CA bundle (PEM) the Config Server's certificate must chain to, instead of the system roots")
	fl.StringVar(&f.tlsCert, "tls-cert", "", "client certificate (PEM) for a Config Server that requires mTLS (with --tls-key)")
	fl.StringVar(&f.tlsKey, "tls-key", "", "the client certificate's private key (PEM)")
	fl.DurationVar(&f.skew, "skew", 30*time.Second, "clock-skew tolerance on every validity window")
	fl.StringVar(&f.oci, "oci", "", "verify REPOSITORY@sha256:<hex> pulled from an OCI registry with a signed delivery manifest for it (attached as a referrer, or the --server's)")
	jsonOutputFlag(cmd, "one evidence line per load")
	fl.BoolVar(&f.report, "report", false, "report APPLIED/REJECTED evidence to the Config Server (POST /configs/evidence) as an unverified observation")
	fl.StringVar(&f.status.listen, "status-listen", "", "with --watch: serve the runtime status endpoint (GET /status, POST /reload, GET /metrics) on ADDR")
	fl.StringVar(&f.status.controlPub, "control-pub", "", "cosign.pub of the control plane, whose tokens open /status and /reload (required with --status-listen)")
	fl.BoolVar(&f.status.anonymous, "status-anonymous", false, "serve GET /status without a control token (POST /reload always needs one)")
	fl.StringVar(&f.exec, "exec", "", "after each change of --out, run CMD with /bin/sh -c (env CONFIGPUB_EVENT, CONFIGPUB_FILE, CONFIGPUB_SNAPSHOT_ID, CONFIGPUB_ARTIFACT_DIGEST, ...)")
	fl.StringVar(&f.signal, "signal", "", "after each change of --out, send PID[:SIGNAL] (default HUP) to the runtime's process")
	for _, name := range []string{"host", "service-id", "env-tag", "audience", "trust-key", "out"} {
		_ = cmd.MarkFlagRequired(name)
	}
	root.AddCommand(cmd)
}

// validate checks flag combinations cobra cannot express.
func (f fetchFlags) validate() error {
	switch {
	case f.oci == "" && f.server == "":
		return errors.New("--server or --oci is required")
	case f.oci != "" && f.watch:
		return errors.New("--watch polls the Config Server; an --oci digest never changes")
	case f.server != "" && f.tokenFile == "":
		return errors.New("--server needs --token-file")
	case f.cacheDir == "":
		return errors.New("--cache-dir is required: it keeps the seen-state that refuses replayed manifests, and the last-known-good")
	case f.watch && f.interval <= 0:
		return fmt.Errorf("--interval %s must be positive", f.interval)
	case f.report && f.server == "":
		return errors.New("--report needs --server")
	case (f.tlsCert == "") != (f.tlsKey == ""):
		return errors.New("--tls-cert and --tls-key go together (the client certificate and its key)")
	case (f.tlsCA != "" || f.tlsCert != "") && f.server == "":
		return errors.New("--tls-ca, --tls-cert and --tls-key are for the --server connection")
	}
	if f.server != "" {
		if err := checkServerURL(f.server); err != nil {
			return err
		}
	}
	if err := f.status.validate(f.watch); err != nil {
		return err
	}
	if f.oci != "" {
		if _, _, err := registry.ParseRef(f.oci); err != nil {
			return err
		}
	}
	if f.signal != "" {
		if _, _, err := reloadhook.ParseSignal(f.signal); err != nil {
			return err
		}
	}
	return nil
}

// checkServerURL refuses a --server the client could only fail to reach
// (and then fail closed, removing --out): one that does not parse, is not
// http(s) with a host, or has a query or fragment, which the client's
// /configs?… request would be appended to.
func checkServerURL(s string) error {
	u, err := url.Parse(s)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // url.Error repeats the URL, a password included
		}
		return fmt.Errorf("--server: not a URL (%v): want http(s)://HOST[:PORT][/PATH]", err)
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" {
		// Shown without its password, query or fragment (a token in it).
		shown := *u
		shown.RawQuery, shown.Fragment = "", ""
		elided := ""
		if u.RawQuery != "" || u.Fragment != "" {
			elided = "?…"
		}
		return fmt.Errorf("--server %s%s: want http(s)://HOST[:PORT][/PATH], without a query or fragment", shown.Redacted(), elided)
	}
	return nil
}

func runFetch(cmd *cobra.Command, f fetchFlags) error {
	if err := f.validate(); err != nil {
		return usageError{err}
	}
	// Before anything is loaded: a load would persist the last-known-good
	// and the seen-state and then fail to write --out, and the next run,
	// finding nothing new, would neither write nor report it.
	// A directory is never written, and failing closed would remove it
	// when empty.
	if err := checkOutFile(f.out, "fetch"); err != nil {
		return usageError{err}
	}
	// A --cache-dir that is a file can hold no seen-state: every load
	// would fail closed, removing --out.
	if fi, err := os.Stat(f.cacheDir); err == nil && !fi.IsDir() {
		return usageError{fmt.Errorf("--cache-dir %s is not a directory", f.cacheDir)}
	}
	// A fetch killed while it wrote --out left its temporary file next to
	// it (.values.yml.<digits>.tmp): remove those before the first write,
	// as the client does for its cache files.
	if removed, err := atomicfile.RemoveStale(f.out); err != nil {
		fmt.Fprintln(cmd.ErrOrStderr(), "configpub fetch:", err)
	} else if len(removed) > 0 {
		fmt.Fprintf(cmd.ErrOrStderr(), "configpub fetch: removed %d temporary file(s) an interrupted write of %s left: %s\n",
			len(removed), f.out, strings.Join(removed, ", "))
	}
	pem, err := os.ReadFile(f.trustKey)
	if err != nil {
		return fmt.Errorf("--trust-key: %w", err)
	}
	keys, err := signing.ParsePublicKeys(pem)
	if err != nil {
		return fmt.Errorf("--trust-key %s: %w", f.trustKey, err)
	}
	opts := client.Options{
		ServerURL: f.server, Identity: f.identity, Audience: f.audience,
		TrustedKeys: keys, CacheDir: f.cacheDir, Skew: f.skew,
	}
	if f.tokenFile != "" {
		opts.TokenSource = client.TokenFile(f.tokenFile)
	}
	if f.tlsCA != "" || f.tlsCert != "" {
		tr, err := tlsfiles.NewTransport(f.tlsCA, f.tlsCert, f.tlsKey,
			tlsfiles.Options{Logger: slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), nil))})
		if err != nil {
			return err
		}
		opts.HTTPClient = &http.Client{Transport: tr, Timeout: client.DefaultHTTPTimeout}
	}
	c, err := client.New(opts)
	if err != nil {
		return usageError{err}
	}
	ctx := cmd.Context()
	out, errOut := cmd.OutOrStdout(), cmd.ErrOrStderr()
	f.hook = &reloadhook.Hook{Exec: f.exec, Output: errOut}
	f.outSt = &outState{}
	if f.signal != "" {
		f.hook.PID, f.hook.Signal, _ = reloadhook.ParseSignal(f.signal) // checked by validate
	}
	if f.watch {
		return f.watchLoop(ctx, c, opts, pem, out, errOut)
	}

	var ev *client.Evidence
	changes := f.outSt.changeCount()
	if f.oci != "" {
		rc, rerr := f.rf.client()
		if rerr != nil {
			return rerr
		}
		ev, err = c.LoadOCI(ctx, &ocipull.Puller{Registry: rc, Keys: keys, ManifestKeys: keys, Identity: f.identity}, f.oci)
	} else {
		ev, err = c.Load(ctx)
	}
	if herr := f.handle(ctx, c, ev, out, errOut); herr != nil {
		if _, failed := f.outSt.running(); failed != nil && failed.FailedClosed && !exists(f.out) {
			// --out could not be written and holds nothing: the runtime
			// has no configuration, as the printed line says.
			return failClosedError{herr}
		}
		return herr
	}
	switch {
	case errors.Is(err, client.ErrExpired) || errors.Is(err, client.ErrNoSnapshot):
		return failClosedError{err}
	case err != nil:
		return err // rejected or unavailable, last-known-good kept: exit 1
	case ev.CacheError != "" && ev.Reason == client.ReasonLeaseRenewed && f.outSt.changeCount() == changes:
		// A renewal of the snapshot --out already holds, verified; what
		// could not be written is not needed against replays (the client
		// refuses a renewal that would need it), and --out is as it was.
		fmt.Fprintf(errOut, "configpub fetch: warning: lease of snapshot %s renewed until %s and --out unchanged, but --cache-dir was not updated: %s\n",
			ev.SnapshotID, ev.LeaseExpiresAt, ev.CacheError)
	case ev.CacheError != "":
		return fmt.Errorf("applied, but the last-known-good was not persisted: %s", ev.CacheError)
	}
	return nil
}

// exists reports whether path names a file (false when it cannot be
// told: a runtime cannot read it either).
func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// watchLoop keeps --out current with c until ctx ends. Every --interval
// it reads --trust-key again; when the file names another set of keys, the
// client is started again over the same cache directory with them — what a
// restart of the sidecar does: its last-known-good is verified again, and
// what a removed key signed is no longer trusted — so a key added or
// removed in a mounted file takes effect without restarting the runtime.
// --control-pub is read again as often, and a changed control key starts
// the status endpoint again with it.
func (f fetchFlags) watchLoop(ctx context.Context, c *client.Client, opts client.Options, pem []byte, out, errOut io.Writer) error {
	var ctlPEM []byte
	if f.status.controlPub != "" {
		ctlPEM, _ = os.ReadFile(f.status.controlPub) // serveStatus reports an error
	}
	fresh := true      // c has not loaded yet
	toldToken := false // the missing --token-file was reported
	for {
		first := fresh
		if fresh && opts.CacheDir != "" {
			// The last-known-good, verified again, is written to --out
			// before the first request: a Config Server holds that request
			// until the pointer moves, so a sidecar restarted with its
			// cache but an empty --out (a rescheduled pod) would otherwise
			// leave its runtime without configuration for up to --interval.
			// Written, printed and hooked as any load, not reported: the
			// first load reports what the runtime runs.
			quiet := f
			quiet.report = false
			if ev, err := c.Restore(ctx); err == nil {
				if herr := quiet.handle(ctx, c, ev, out, errOut); herr != nil {
					fmt.Fprintln(errOut, "configpub fetch:", herr)
				}
			}
		}
		fresh = false
		wctx, stop := context.WithCancel(ctx)
		var stopStatus func()
		if f.status.listen != "" {
			f.handleMu = &sync.Mutex{}
			var err error
			stopStatus, err = f.status.serveStatus(wctx, c, func(ev *client.Evidence) {
				if herr := f.handle(ctx, c, ev, out, errOut); herr != nil {
					fmt.Fprintln(errOut, "configpub fetch:", herr)
				}
			}, f.outSt, errOut)
			if err != nil {
				stop()
				return err
			}
		}
		// The key files' watchers get what they read from this iteration's
		// values and end with it, before the next one changes them.
		type change struct{ trust, control []byte } // a file's new content, nil when unchanged
		changed := make(chan change, 2)
		var watchers sync.WaitGroup
		trustPEM, trustUsable := pem, f.usableKeys(opts)
		watchers.Go(func() {
			if next, ok := f.keyFileChange(wctx, f.trustKey, trustPEM, trustUsable, errOut); ok {
				changed <- change{trust: next}
				stop()
			}
		})
		if ctlPEM != nil {
			ctlCur, ctlUsable := ctlPEM, usableControlKeys(opts.TrustedKeys)
			watchers.Go(func() {
				if next, ok := f.keyFileChange(wctx, f.status.controlPub, ctlCur, ctlUsable, errOut); ok {
					changed <- change{control: next}
					stop()
				}
			})
		}
		if first {
			// A sidecar started before its token is provisioned (projected
			// a moment later, a Vault agent's sink) waits for it instead of
			// loading without one; the status endpoint meanwhile reports
			// what --out holds (the last-known-good, or nothing: failed
			// closed). A token that disappears later is the load's error.
			f.waitToken(wctx, c, &toldToken, errOut)
		}
		err := c.Watch(wctx, f.interval, func(ev *client.Evidence, err error) {
			if herr := f.handle(ctx, c, ev, out, errOut); herr != nil {
				fmt.Fprintln(errOut, "configpub fetch:", herr)
			}
		})
		stop()
		watchers.Wait()
		if stopStatus != nil {
			stopStatus()
		}
		if ctx.Err() != nil {
			return nil // interrupted: a clean stop
		}
		select {
		case ch := <-changed:
			if ch.control != nil {
				keys, _ := signing.ParsePublicKeys(ch.control) // checked by keyFileChange
				fmt.Fprintf(errOut, "configpub fetch: %s changed: the status endpoint starts again with control key %s\n",
					f.status.controlPub, strings.Join(keyIDs(keys), ", "))
				ctlPEM = ch.control
				continue
			}
			keys, _ := signing.ParsePublicKeys(ch.trust) // checked by keyFileChange
			opts.TrustedKeys = keys
			nc, err := client.New(opts)
			if err != nil {
				return err // checked by usableKeys
			}
			fmt.Fprintf(errOut, "configpub fetch: %s changed: trusting %s; the client starts again over --cache-dir\n",
				f.trustKey, strings.Join(keyIDs(keys), ", "))
			c, pem, fresh = nc, ch.trust, true
		default:
			if errors.Is(err, context.Canceled) {
				return nil
			}
			return err
		}
	}
}

// waitToken waits until c's --token-file holds a token (client.WaitToken),
// saying once per run on errOut that it is missing — naming the file,
// never a token — and what the runtime has meanwhile, and when it appeared.
func (f fetchFlags) waitToken(ctx context.Context, c *client.Client, told *bool, errOut io.Writer) {
	waited := false
	err := c.WaitToken(ctx, func(err error) {
		waited = true
		if *told {
			return
		}
		*told = true
		meanwhile := "no configuration meanwhile: failed closed"
		if s, cerr := c.Current(); cerr == nil {
			meanwhile = fmt.Sprintf("its last-known-good, snapshot %s, meanwhile, until its lease ends at %s",
				s.SnapshotID, s.ExpiresAt.UTC().Format(time.RFC3339))
		}
		fmt.Fprintf(errOut, "configpub fetch: waiting for --token-file %s (%v): checked again with back-off up to %s apart; the runtime has %s\n",
			f.tokenFile, err, client.MaxTokenRetryDelay, meanwhile)
	})
	if waited && err == nil && exists(f.tokenFile) { // else the lease ended: the next load fails closed
		fmt.Fprintf(errOut, "configpub fetch: --token-file %s provisioned: loading\n", f.tokenFile)
	}
}

// usableKeys returns the check a new trusted key set must pass before the
// client starts again with it: what client.New and the status endpoint
// (whose control keys must not be manifest keys) would refuse is refused
// here, while the keys in use go on.
func (f fetchFlags) usableKeys(opts client.Options) func([]signing.TrustedKey) error {
	return func(keys []signing.TrustedKey) error {
		opts.TrustedKeys = keys
		if _, err := client.New(opts); err != nil {
			return err
		}
		if f.status.controlPub == "" {
			return nil
		}
		pem, err := os.ReadFile(f.status.controlPub)
		if err != nil {
			return fmt.Errorf("read control key: %w", err)
		}
		control, err := signing.ParsePublicKeys(pem)
		if err != nil {
			return fmt.Errorf("%s: %w", f.status.controlPub, err)
		}
		return disjoint(keys, control)
	}
}

// usableControlKeys returns the check a new control key set must pass:
// none of them may be a trusted manifest key.
func usableControlKeys(trusted []signing.TrustedKey) func([]signing.TrustedKey) error {
	return func(control []signing.TrustedKey) error { return disjoint(trusted, control) }
}

// disjoint refuses a key that is both a manifest key and the control
// plane's.
func disjoint(trusted, control []signing.TrustedKey) error {
	for _, k := range trusted {
		for _, c := range control {
			if k.ID == c.ID {
				return fmt.Errorf("key %s is both a trusted manifest key (--trust-key) and the control plane's key (--control-pub)", k.ID)
			}
		}
	}
	return nil
}

// keyFileChange reads the public-key file path every --interval until it
// names another set of keys than the one in pem that passes usable, and
// returns the file's content then; a file that cannot be read or parsed,
// or whose keys do not pass, is reported and keeps the keys in use. It
// returns false when ctx ends first.
func (f fetchFlags) keyFileChange(ctx context.Context, path string, pem []byte, usable func([]signing.TrustedKey) error, errOut io.Writer) ([]byte, bool) {
	cur, _ := signing.ParsePublicKeys(pem)
	t := time.NewTicker(f.interval)
	defer t.Stop()
	var reported string
	for {
		select {
		case <-ctx.Done():
			return nil, false
		case <-t.C:
		}
		next, err := os.ReadFile(path)
		if err == nil && bytes.Equal(next, pem) {
			continue
		}
		var keys []signing.TrustedKey
		if err == nil {
			keys, err = signing.ParsePublicKeys(next)
		}
		if err == nil && !slices.Equal(keyIDs(keys), keyIDs(cur)) {
			err = usable(keys)
		}
		if err != nil {
			if msg := err.Error(); msg != reported {
				fmt.Fprintf(errOut, "configpub fetch: %s not read again; the keys in use are kept: %v\n", path, err)
				reported = msg
			}
			continue
		}
		if !slices.Equal(keyIDs(keys), keyIDs(cur)) {
			return next, true
		}
		pem = next // the same keys, written differently
	}
}

func keyIDs(keys []signing.TrustedKey) []string {
	ids := make([]string, len(keys))
	for i, k := range keys {
		ids[i] = k.ID
	}
	slices.Sort(ids)
	return ids
}

// handle writes --out from the current snapshot (or removes it when failing
// closed), prints the evidence as one JSON line and reports it if asked.
// When --out cannot be written the evidence is REJECTED OUT_UNWRITABLE
// naming the error, printed and reported all the same, and the error is
// returned after it; the load that later writes it reports APPLIED.
func (f fetchFlags) handle(ctx context.Context, c *client.Client, ev *client.Evidence, out, errOut io.Writer) error {
	if f.handleMu != nil {
		f.handleMu.Lock()
		defer f.handleMu.Unlock()
	}
	var event *reloadhook.Event
	var outErr error
	if snap, err := c.Current(); err == nil {
		changed, err := writeIfChanged(f.out, snap.Values)
		switch {
		case err != nil:
			running, _ := f.outSt.running()
			ev = outUnwritable(ev, running, err)
			f.outSt.writeFailed(ev)
			outErr = err
		case changed:
			f.outSt.changed()
			event = &reloadhook.Event{File: f.out, SnapshotID: snap.SnapshotID, PublicationID: snap.PublicationID,
				ArtifactDigest: snap.ArtifactDigest, ReleaseVersion: snap.Envelope.ReleaseVersion}
			if ev.Outcome == client.OutcomeUnchanged {
				ev = outWritten(ev, snap)
			}
			f.outSt.wrote(snap)
		default:
			f.outSt.wrote(snap)
		}
	} else if err := os.Remove(f.out); err == nil || errors.Is(err, fs.ErrNotExist) {
		if err == nil {
			event = &reloadhook.Event{File: f.out, Removed: true}
			f.outSt.changed()
		}
		f.outSt.removed()
	} else {
		outErr = fmt.Errorf("fail closed: remove %s: %w", f.out, err)
	}
	if err := json.NewEncoder(out).Encode(ev); err != nil {
		return err
	}
	if event != nil && f.hook != nil && f.hook.Enabled() {
		if err := f.hook.Run(ctx, *event); err != nil {
			return err
		}
	}
	if f.report && (ev.Outcome == client.OutcomeApplied || ev.Outcome == client.OutcomeRejected) {
		if err := c.ReportEvidence(ctx, ev); err != nil {
			fmt.Fprintln(errOut, "configpub fetch: evidence not reported:", err)
		}
	}
	return outErr
}
