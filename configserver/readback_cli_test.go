package configserver_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/configpub/configpub/internal/cosignkey"
	"github.com/configpub/configpub/readback"
)

// TestReadbackCommandRecordsRealRuntimes runs `configpub readback` (the
// built command) against three real runtimes on the wall clock (the
// command signs its control tokens with the time it runs at): release 1
// active, release 2 staged for two-phase activation. A first readback
// records what each runtime runs (its results in the --targets file's
// order, the receipts in the store); a second records nothing new; a
// --prefetch readback records one READY candidate receipt of release 2's
// snapshot per runtime; with one runtime's endpoint gone the command exits
// 1 naming it, and the other two are still read.
func TestReadbackCommandRecordsRealRuntimes(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: builds the configpub command")
	}
	t.Parallel()
	r := newRollout(t, rolloutOptions{start: time.Now().UTC().Truncate(time.Second)})
	bin := buildConfigpub(t)
	var list strings.Builder
	list.WriteString("targets:\n")
	for _, rt := range r.runtimes {
		fmt.Fprintf(&list, "  - {endpoint: %q, host: %q, serviceId: %q, envTag: prod}\n", rt.status.URL, rt.id.Host, rt.id.ServiceID)
	}
	targets := filepath.Join(t.TempDir(), "runtimes.yaml")
	if err := os.WriteFile(targets, []byte(list.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	// run runs the command with args and returns its results in the
	// targets' order, its standard error and its exit code.
	run := func(args ...string) ([]readback.Result, string, int) {
		t.Helper()
		// The command stamps its control tokens with the wall clock; the
		// runtimes accept them within 30 s of theirs.
		r.clock.Set(time.Now())
		cmd := exec.Command(bin, append([]string{"readback", "--env", "prod", "--targets", targets,
			"--control-key", r.ctlKeyPath, "--database", r.promoterDB, "-o", "json"}, args...)...)
		cmd.Env = append(os.Environ(), cosignkey.PasswordEnv+"="+r.password)
		var out, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &stderr
		code := 0
		if err := cmd.Run(); err != nil {
			var exit *exec.ExitError
			if !errors.As(err, &exit) {
				t.Fatalf("configpub readback: %v", err)
			}
			code = exit.ExitCode()
		}
		var res []readback.Result
		if err := json.Unmarshal(out.Bytes(), &res); err != nil || len(res) != len(r.runtimes) {
			t.Fatalf("readback %v: %d results (%v), want %d\n%s%s", args, len(res), err, len(r.runtimes), out.String(), stderr.String())
		}
		for i, x := range res {
			if x.Target.Identity() != r.runtimes[i].id {
				t.Fatalf("result %d is %s, want %s: not in the targets' order", i, x.Target.Identity(), r.runtimes[i].id)
			}
		}
		return res, stderr.String(), code
	}
	readJSON := func(args ...string) []readback.Result {
		t.Helper()
		res, stderr, code := run(args...)
		for _, x := range res {
			if code != 0 || x.Error != "" {
				t.Fatalf("readback %v: exit %d, %s: %q\n%s", args, code, x.Target.Identity(), x.Error, stderr)
			}
		}
		return res
	}
	receipts := func(phase, outcome, snapshot string) int {
		t.Helper()
		return r.owner(t, "SELECT count(*) FROM configpub.runtime_evidence WHERE kind = 'receipt' AND env_tag = 'prod'"+
			" AND phase = '"+phase+"' AND outcome = '"+outcome+"' AND snapshot_id = '"+snapshot+"'")
	}

	for i, x := range readJSON() {
		if x.Status == nil || x.Status.Current == nil || x.Status.Current.SnapshotID != r.r1[i].SnapshotID || x.Recorded == 0 {
			t.Fatalf("%s: got %+v, want it read running release 1's %s and recorded", x.Target.Identity(), x.Status, r.r1[i].SnapshotID)
		}
		if n := receipts("current", "APPLIED", r.r1[i].SnapshotID); n != 1 {
			t.Errorf("%s: %d APPLIED receipts of release 1 in the store, want 1", x.Target.Identity(), n)
		}
	}
	for _, x := range readJSON() {
		if x.Recorded != 0 {
			t.Errorf("%s: the same state read again recorded %d receipts, want none", x.Target.Identity(), x.Recorded)
		}
	}
	for i, x := range readJSON("--prefetch") {
		if n := receipts("candidate", "READY", r.r2[i].SnapshotID); x.Recorded == 0 || n != 1 {
			t.Errorf("%s: prefetch recorded %d, %d READY receipts of release 2's %s in the store, want one", x.Target.Identity(), x.Recorded, n, r.r2[i].SnapshotID)
		}
	}

	r.runtimes[1].status.Close()
	res, stderr, code := run()
	gone := r.runtimes[1].id.Host + "/" + r.runtimes[1].id.ServiceID
	if code != 1 || !strings.Contains(stderr, gone) || res[1].Error == "" {
		t.Fatalf("readback with %s gone: exit %d, its error %q, want 1 naming it\nstderr: %s", gone, code, res[1].Error, stderr)
	}
	for _, i := range []int{0, 2} {
		if x := res[i]; x.Error != "" || x.Status == nil || x.Status.Current == nil || x.Status.Current.SnapshotID != r.r1[i].SnapshotID {
			t.Errorf("%s with another runtime gone: error %q, status %+v; want it read running release 1", x.Target.Identity(), x.Error, x.Status)
		}
	}
}
