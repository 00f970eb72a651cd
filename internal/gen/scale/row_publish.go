package main

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/sirupsen/logrus"
	"oras.land/oras-go/v2/registry/remote/credentials"

	"github.com/configpub/configpub/bundle"
	"github.com/configpub/configpub/compiler"
	"github.com/configpub/configpub/internal/policytree"
	"github.com/configpub/configpub/registry"
	"github.com/configpub/configpub/registry/compiled"
	"github.com/configpub/configpub/registry/embedded"
)

// publishConcurrency is the publisher's artifacts in flight (the CLI's
// default).
const publishConcurrency = 8

// publishRows serves a fresh embedded registry (CNCF Distribution,
// filesystem storage, in this process) and publishes the compiled release
// of the generated repository to it from a child process the way
// `configpub publish` does (see publishChild), twice: a first publish, then
// an unchanged re-publish with the same key. The child's wall time and
// maximum resident set size are the kernel's accounting of it, compile
// included; requests are counted at the registry.
func publishRows(ctx context.Context, s *size) ([]row, error) {
	// Distribution logs every request (and every 404 of an existence
	// check as an error) through logrus's standard logger: discarded.
	logrus.SetOutput(io.Discard)
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	der, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, err
	}
	keyFile := filepath.Join(s.dir, "publish-key.pem")
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der}), 0o600); err != nil {
		return nil, err
	}
	reg, err := embedded.New(ctx, embedded.Options{Dir: filepath.Join(s.dir, "registry")})
	if err != nil {
		return nil, err
	}
	defer reg.Close()
	var requests atomic.Int64
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		requests.Add(1)
		reg.ServeHTTP(w, req)
	}), ReadHeaderTimeout: 30 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	defer srv.Close()
	if _, err := os.Stat(filepath.Join(s.repo, compiler.ManifestPath(env))); err != nil {
		// Run alone (-steps publish): compile the release first.
		if _, err := measure(ctx, "compile", s.repo, time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).Format(time.RFC3339)); err != nil {
			return nil, err
		}
	}
	n := strconv.Itoa(s.targets + 1) // and the release artifact
	args := []string{"publish", ln.Addr().String(), keyFile, s.repo, strconv.Itoa(publishConcurrency)}
	load0 := loadAvg()
	firstReq := requests.Load()
	first, err := measure(ctx, args...)
	if err != nil {
		return nil, err
	}
	firstReq = requests.Load() - firstReq
	if want := n + " 0"; !strings.HasPrefix(first.out, want) {
		return nil, fmt.Errorf("first publish of %d targets and the release: child printed %q, want %q pushed/present", s.targets, first.out, want)
	}
	again, againReq, err := republish(ctx, args, n, &requests)
	if err != nil {
		return nil, err
	}
	recheck, recheckReq, err := republish(ctx, append(args, "recheck"), n, &requests)
	if err != nil {
		return nil, err
	}
	perArt := func(r int64) string { return fmt.Sprintf("%.1f requests/artifact", float64(r)/float64(s.targets+1)) }
	rate := float64(s.targets) / first.wall.Seconds()
	rows := []row{
		{figure: "first publish (push + sign)", value: fmt.Sprintf("%s, %.0f/s", secs(first.wall), rate),
			note: perArt(firstReq) + fmt.Sprintf("; concurrency %d; load %s→%s", publishConcurrency, load0, loadAvg())},
		{figure: "publisher max RSS", value: mib(first.maxRSS), note: "configpub publish: compile for the manifest, then compile and push host by host; bar ≤ 512 MiB"},
		{figure: "unchanged re-publish", value: secs(again.wall), baseline: secs(first.wall) + " first publish",
			ratio: fmt.Sprintf("%.2f%%", 100*again.wall.Seconds()/first.wall.Seconds()),
			note:  fmt.Sprintf("%d requests: the committed files name the release artifact, in place; nothing compiled; bar ≤ 2%%", againReq)},
		{figure: "re-publish max RSS", value: mib(again.maxRSS)},
		{figure: "unchanged re-publish --recheck", value: secs(recheck.wall), baseline: secs(first.wall) + " first publish",
			ratio: fmt.Sprintf("%.2f%%", 100*recheck.wall.Seconds()/first.wall.Seconds()),
			note:  perArt(recheckReq) + " (one HEAD of each tag; compiles twice)"},
	}
	// Logged at once too: removing the size's work directory (400,000
	// registry files at 100,000 targets) delays the table for minutes.
	for _, r := range rows {
		logf("%d targets: publish: %s = %s (%s %s) %s", s.targets, r.figure, r.value, r.baseline, r.ratio, r.note)
	}
	return rows, nil
}

// republish runs the publish child again on an unchanged release and
// checks it pushed nothing.
func republish(ctx context.Context, args []string, n string, requests *atomic.Int64) (measured, int64, error) {
	r0 := requests.Load()
	m, err := measure(ctx, args...)
	if err != nil {
		return m, 0, err
	}
	if want := "0 " + n; !strings.HasPrefix(m.out, want) {
		return m, 0, fmt.Errorf("re-publish (%s) of %s artifacts: child printed %q, want %q pushed/present", strings.Join(args[4:], " "), n, m.out, want)
	}
	return m, requests.Load() - r0, nil
}

// publishChild is `configpub publish` on the compiled repository: "HOST
// KEYFILE REPO CONCURRENCY [recheck]", through compiled.PublishRelease as
// the command does. Without "recheck", the release artifact named by the
// committed files is looked up first and, in place, ends it with nothing
// compiled. Otherwise the committed release is compiled for its manifest
// (verified against the release before it, which the compile step saved
// next to the repository), then again host by host while its artifacts
// stream into registry.Client.PublishSeq (compiled.Stream). It prints
// "pushed present bytes"; progress goes to stderr every 10 s.
func publishChild(args []string) error {
	if len(args) != 4 && (len(args) != 5 || args[4] != "recheck") {
		return errors.New("publish: want HOST KEYFILE REPO CONCURRENCY [recheck]")
	}
	conc, err := strconv.Atoi(args[3])
	if err != nil {
		return err
	}
	b, err := os.ReadFile(args[1])
	if err != nil {
		return err
	}
	blk, _ := pem.Decode(b)
	if blk == nil {
		return errors.New("publish: key file has no PEM block")
	}
	key, err := x509.ParseECPrivateKey(blk.Bytes)
	if err != nil {
		return err
	}
	ctx := context.Background()
	repo := args[2]
	recheck := len(args) == 5
	c, err := registry.New(registry.Options{PlainHTTP: true, Concurrency: conc, Credentials: credentials.NewMemoryStore()})
	if err != nil {
		return err
	}
	prefix := args[0] + "/scale"
	tree, err := policytree.Dir(repo, policytree.Limits{})
	if err != nil {
		return err
	}
	defer tree.Close()
	if !recheck {
		if _, _, ok := compiled.FindPublished(ctx, c, prefix, tree, env); ok {
			// What the release artifact, pushed last, says.
			n, err := releaseTargets(tree)
			if err != nil {
				return err
			}
			fmt.Printf("0 %d 0 (release artifact in place, found from the committed files)\n", n+1)
			return nil
		}
	}
	res, err := compiler.Compile(ctx, tree, compiler.Options{EnvTag: env, ManifestOnly: true, CheckOnly: true, // as configpub publish
		PreviousTree: previousTree(repo)})
	if err != nil {
		return err
	}
	if err := res.Stale(); err != nil {
		return fmt.Errorf("publish: %w", err)
	}
	progress := registry.NewProgress(os.Stderr, res.TargetCount()+1, 10*time.Second, nil)
	sum, present, err := compiled.PublishRelease(ctx, c, res,
		registry.PublishRequest{Prefix: prefix, Signer: key, Progress: progress.Report}, recheck)
	if present != nil {
		fmt.Printf("0 %d 0 (release artifact in place, found after the compile)\n", res.TargetCount()+1)
		return nil
	}
	progress.Finish()
	if err != nil {
		return err
	}
	fmt.Printf("%d %d %d\n", sum.Pushed, sum.AlreadyPresent, sum.Bytes)
	return nil
}

// releaseTargets counts the targets the committed release's root lists.
func releaseTargets(fsys fs.FS) (int64, error) {
	p := compiler.ManifestPath(env)
	b, err := fs.ReadFile(fsys, p)
	if err != nil {
		return 0, err
	}
	root, err := bundle.ParseRoot(p, b)
	if err != nil {
		return 0, err
	}
	var n int64
	for _, s := range root.Shards {
		n += s.Targets
	}
	return n, nil
}

// savedRelease is the directory where the compile step keeps the files of
// each release it wrote (releases/<envTag>.yaml and its shards): the history
// a Git repository would hold.
func savedRelease(repo string, version int64) string {
	return fmt.Sprintf("%s.release-%d", repo, version)
}

// previousTree reads release N-1 from the files the compile step saved, one
// file at a time, as `configpub compile` and `configpub publish` read it
// from the tree of the commit that recorded it (compiler.Options.PreviousTree).
func previousTree(repo string) compiler.PreviousTree {
	return func(_ context.Context, envTag string, version int64) (fs.FS, error) {
		dir := savedRelease(repo, version)
		if _, err := os.Stat(filepath.Join(dir, filepath.FromSlash(compiler.ManifestPath(envTag)))); err != nil {
			return nil, fmt.Errorf("release %d of %s: %w (%v)", version, envTag, bundle.ErrReleaseNotRecorded, err)
		}
		return policytree.New(os.DirFS(dir), policytree.Limits{}), nil
	}
}

// activationRows runs the promoter's activation benchmark at s.targets
// (BenchmarkActivationScale) on a private PostgreSQL: the activation of
// every pointer (a rollback between two recorded releases) and a promotion
// (record + activate) against the hand-written two-statement baseline plus
// serial signing, and against a same-work baseline; peak Go heap growth of
// the activation against the baseline's; and the same promotion with
// targets/50 Workflow views to record against one without
// (BenchmarkViewRecordingScale); and a lease renewal of every pointer
// against the same-work baseline, with its peak heap growth
// (BenchmarkLeaseRenewalScale).
func activationRows(ctx context.Context, s *size) ([]row, error) {
	load0 := loadAvg()
	m, _, err := benchMetrics(ctx, "./promoter", "BenchmarkActivationScale", 60*time.Minute,
		"-activation.targets="+strconv.Itoa(s.targets))
	if err != nil {
		return nil, err
	}
	v, _, err := benchMetrics(ctx, "./promoter", "BenchmarkViewRecordingScale", 60*time.Minute,
		"-activation.targets="+strconv.Itoa(s.targets))
	if err != nil {
		return nil, err
	}
	r, _, err := benchMetrics(ctx, "./promoter", "BenchmarkLeaseRenewalScale", 60*time.Minute,
		"-activation.targets="+strconv.Itoa(s.targets))
	if err != nil {
		return nil, err
	}
	ms := func(k string) string { return fmt.Sprintf("%.0f ms", m[k]) }
	load := fmt.Sprintf("load %s→%s", load0, loadAvg())
	return []row{
		{figure: "activate every pointer (rollback)", value: ms("activate-ms/op"),
			baseline: ms("baseline-ms/op") + " two statements + serial signing",
			ratio:    ratio(m["activate-ms/op"], m["baseline-ms/op"]), note: "bar ≤ 3x; " + load},
		{figure: "activate every pointer vs same work", value: ms("activate-ms/op"),
			baseline: ms("same-work-baseline-ms/op") + " hand-written: all pointer columns, pointer_move, delivery_manifest, NOTIFY",
			ratio:    ratio(m["activate-ms/op"], m["same-work-baseline-ms/op"]), note: "no journal, lock or CAS in the baseline"},
		{figure: "promote (record + activate)", value: ms("promote-ms/op"), baseline: ms("baseline-ms/op"),
			ratio: ratio(m["promote-ms/op"], m["baseline-ms/op"])},
		{figure: "activation peak heap growth", value: fmt.Sprintf("%.0f MiB", m["activate-peak-heap-MiB"]),
			baseline: fmt.Sprintf("%.0f MiB baseline", m["baseline-peak-heap-MiB"]),
			ratio:    ratio(m["activate-peak-heap-MiB"], m["baseline-peak-heap-MiB"]), note: "moves in batches of 2,000 in one transaction"},
		{figure: "replay of the promotion", value: ms("replay-ms/op"), baseline: ms("promote-ms/op") + " promote",
			ratio: ratio(m["replay-ms/op"], m["promote-ms/op"]), note: "bar ≤ 0.1x"},
		{figure: fmt.Sprintf("promote with %.0f Workflow views", v["views"]), value: fmt.Sprintf("%.0f ms", v["views-ms/op"]),
			baseline: fmt.Sprintf("%.0f ms without views", v["plain-ms/op"]), ratio: ratio(v["views-ms/op"], v["plain-ms/op"]),
			note: "each view allows three Agents; recorded in the activation transaction"},
		{figure: "lease renewal of every pointer", value: fmt.Sprintf("%.0f ms", r["renew-ms/op"]),
			baseline: fmt.Sprintf("%.0f ms same-work baseline", r["same-work-baseline-ms/op"]), ratio: ratio(r["renew-ms/op"], r["same-work-baseline-ms/op"]),
			note: fmt.Sprintf("peak heap growth %.0f MiB (baseline %.0f MiB): batches of 2,000 in one transaction", r["renew-peak-heap-MiB"], r["baseline-peak-heap-MiB"])},
	}, nil
}
