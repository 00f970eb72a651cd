package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/configpub/configpub/compiler"
	"github.com/configpub/configpub/internal/gen"
	"github.com/configpub/configpub/internal/policytree"
)

// compileRows compiles the generated repository in a child process (wall
// time and maximum resident set size), writes the sharded release manifest
// and measures its files, then changes one Agent, compiles again and counts
// the release files that changed, then compiles the now up-to-date release
// once more (the verification every later reader pays), and again under
// the soft memory limit configpub sets in a container of 1 GiB, and last
// renews the activation windows of release 1's snapshots once they ended
// (compile --renew). The baseline is a child that only reads and hashes
// every source file (the floor of any compile).
func compileRows(ctx context.Context, s *size) ([]row, error) {
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	base, err := measure(ctx, "hash", s.repo)
	if err != nil {
		return nil, err
	}
	// compile compiles with createdAt days after at (env added to the
	// child's environment) and reads the release files it leaves.
	compileWith := func(env []string, days int) (measured, map[string][]byte, error) {
		m, err := measureWith(ctx, env, "compile", s.repo, at.AddDate(0, 0, days).Format(time.RFC3339))
		if err != nil {
			return m, nil, err
		}
		files, err := gen.ReleaseFiles(s.repo)
		return m, files, err
	}
	compile := func(days int) (measured, map[string][]byte, error) { return compileWith(nil, days) }
	c, v1, err := compile(0)
	if err != nil {
		return nil, err
	}
	var total, largest int64
	for _, b := range v1 {
		total += int64(len(b))
		largest = max(largest, int64(len(b)))
	}
	// An Agent of the last host changes (the check that skips the
	// re-derivation of the committed release resolves every host first,
	// so where the host falls does not matter; the last one shows it).
	agents, err := filepath.Glob(filepath.Join(s.repo, "agents", "*.yaml"))
	if err != nil || len(agents) == 0 {
		return nil, fmt.Errorf("no Agent to change in %s/agents: %v", s.repo, err)
	}
	agent := agents[len(agents)-1] // Glob sorts
	b, err := os.ReadFile(agent)
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(agent, bytes.Replace(b, []byte("temperature: 0.2"), []byte("temperature: 0.3"), 1), 0o644); err != nil {
		return nil, err
	}
	rc, v2, err := compile(1)
	if err != nil {
		return nil, err
	}
	// The environment document changes: the committed release is not
	// re-derived at all.
	envFile := filepath.Join(s.repo, "environments", env+".yaml")
	b, err = os.ReadFile(envFile)
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(envFile, append(b, "# changed by make scale\n"...), 0o644); err != nil {
		return nil, err
	}
	ec, ve, err := compile(2)
	if err != nil {
		return nil, err
	}
	// What compile --check, publish and the promoter's gate pay: the
	// committed release is up to date and is re-derived from the one before.
	vc, v3, err := compile(3)
	if err != nil {
		return nil, err
	}
	if n := len(gen.Changed(ve, v3)); n != 0 {
		return nil, fmt.Errorf("compiling an up-to-date release changed %d release files", n)
	}
	// The same in a container of 1 GiB: configpub sets Go's soft memory
	// limit to 90% of its cgroup's limit; the child gets that limit
	// through GOMEMLIMIT (no cgroup needed to measure it).
	lc, v4, err := compileWith([]string{fmt.Sprintf("GOMEMLIMIT=%d", containerLimit*9/10)}, 3)
	if err != nil {
		return nil, err
	}
	if n := len(gen.Changed(v3, v4)); n != 0 {
		return nil, fmt.Errorf("compiling an up-to-date release under a memory limit changed %d release files", n)
	}
	// The daily renewal once release 1's activation windows (the
	// generated lease profile's 21 days) have ended: every target it
	// created is re-issued with the same policy (compile --renew). Its
	// baseline is the same work: one derivation on the committed release,
	// written (the Agent change); the committed release is not derived
	// again.
	nc, vn, err := compileWith([]string{renewEnv + "=1"}, 21)
	if err != nil {
		return nil, err
	}
	baseWhat := "read+hash sources"
	rows := []row{
		{figure: "compile wall", value: secs(c.wall), baseline: secs(base.wall) + " " + baseWhat,
			ratio: ratio(c.wall.Seconds(), base.wall.Seconds()), note: "bar at 100k: 30 s"},
		{figure: "compile max RSS", value: mib(c.maxRSS), baseline: mib(base.maxRSS) + " " + baseWhat,
			ratio: ratio(float64(c.maxRSS), float64(base.maxRSS)), note: "bar at 100k: 1024 MiB"},
	}
	if p, ok := s.prev["compile max RSS"]; ok {
		rows = append(rows, row{figure: "compile max RSS growth", value: ratio(float64(c.maxRSS), p),
			note: fmt.Sprintf("from %d targets; bar 10k->100k: 1.5x", s.prevTargets)})
	}
	s.figures["compile max RSS"] = float64(c.maxRSS)
	rows = append(rows,
		row{figure: "release files", value: fmt.Sprintf("%d, %s total, largest %s", len(v1), mb(total), mb(largest)),
			note: "bars: no file over 1 MB, total <= 40 MB"},
		row{figure: "recompile, 1 Agent of the last host changed", value: secs(rc.wall) + ", " + mib(rc.maxRSS),
			note: fmt.Sprintf("%d release files changed (want 2: root and one shard)", len(gen.Changed(v1, v2)))},
		row{figure: "recompile, environment changed", value: secs(ec.wall) + ", " + mib(ec.maxRSS),
			baseline: secs(rc.wall) + " Agent changed", ratio: ratio(ec.wall.Seconds(), rc.wall.Seconds()),
			note: "an input the root lists changed: found before any host is resolved"},
		row{figure: "compile, up to date (verify against the previous)", value: secs(vc.wall) + ", " + mib(vc.maxRSS),
			note: "what compile --check, publish and the promoter's gate pay"},
		row{figure: "compile, up to date, in 1 GiB", value: secs(lc.wall) + ", " + mib(lc.maxRSS),
			baseline: secs(vc.wall) + " without a limit", ratio: ratio(lc.wall.Seconds(), vc.wall.Seconds()),
			note: fmt.Sprintf("soft memory limit %s (90%% of a 1 GiB container)", mib(containerLimit*9/10))},
		row{figure: "compile --renew, release 1's windows ended", value: secs(nc.wall) + ", " + mib(nc.maxRSS),
			baseline: secs(rc.wall) + " 1 Agent changed", ratio: ratio(nc.wall.Seconds(), rc.wall.Seconds()),
			note: fmt.Sprintf("%s; %d of %d release files changed", nc.out, len(gen.Changed(v4, vn)), len(vn))},
	)
	return rows, nil
}

// containerLimit is the memory limit of the container the limited compile
// row stands for: the bar of the compile's maximum resident set size.
const containerLimit = 1 << 30

// compileChild is "compile DIR CREATEDAT": compile and write the release
// manifest the way `configpub compile` does — the working tree read as a
// policy tree, the committed release verified against the release before
// it, read file by file from where that release is recorded (Git history
// for the command; here the files the previous run saved, savedRelease) —
// and save the written release's files as that history.
func compileChild(args []string) error {
	at, err := time.Parse(time.RFC3339, args[1])
	if err != nil {
		return err
	}
	ctx := context.Background()
	tree, err := policytree.Dir(args[0], policytree.Limits{})
	if err != nil {
		return err
	}
	defer tree.Close()
	res, err := compiler.Compile(ctx, tree, compiler.Options{EnvTag: env, CreatedAt: at, ManifestOnly: true,
		PreviousTree: previousTree(args[0]), Renew: os.Getenv(renewEnv) != ""})
	if err != nil {
		return err
	}
	if err := compiler.Write(ctx, res, args[0], ""); err != nil {
		return err
	}
	saved := savedRelease(args[0], res.Manifest.ReleaseVersion)
	if err := os.MkdirAll(saved, 0o755); err != nil {
		return err
	}
	if err := compiler.WriteReleaseFiles(ctx, saved, res.ManifestBytes); err != nil {
		return err
	}
	fmt.Printf("%d targets, release %d, %d re-issued\n", len(res.Manifest.Targets), res.Manifest.ReleaseVersion, len(res.Reissued))
	return nil
}

// renewEnv, set in a compile child's environment, makes it a renewal
// (configpub compile --renew).
const renewEnv = "CONFIGPUB_SCALE_RENEW"

// hashChild is "hash DIR": read and hash every source file.
func hashChild(args []string) error {
	h := sha256.New()
	n := 0
	err := filepath.WalkDir(args[0], func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		f, err := os.Open(p)
		if err != nil {
			return err
		}
		defer f.Close()
		n++
		_, err = io.Copy(h, f)
		return err
	})
	fmt.Printf("%d %x\n", n, h.Sum(nil)[:4])
	return err
}
