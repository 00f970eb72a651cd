package main

import (
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/configpub/configpub/internal/cosignkey"
	"github.com/configpub/configpub/internal/textlist"
	"github.com/configpub/configpub/promote"
	"github.com/configpub/configpub/registry"
)

// republishProgressEvery is how often registry republish prints how far
// it got (and once at the end).
const republishProgressEvery = 5 * time.Second

// newRegistryRepublishCmd is `configpub registry republish`.
func newRegistryRepublishCmd() *cobra.Command {
	var (
		sf          storeFlags
		rf          registryFlags
		env, prefix string
		key         string
		release     int64
	)
	cmd := &cobra.Command{
		Use:   "republish --env ENV [--release N] --registry HOST[:PORT]/PREFIX --key cosign.key [--database URL] [--plain-http]",
		Short: "Push every target artifact of the active release (or release N) again, from the store's own bytes",
		Long: `republish rebuilds, after the registry lost its storage (or to fill a new one),
the artifact promote pushed for every target of ENV's active release — or of release
N with --release, the release a rollback would return to — from what the store holds
alone: each snapshot's exact values.yml bytes, identity, digests, release version and
creation time make the same manifest, config and layer, so the same manifest digest.
No Git checkout and no compile are needed. Each artifact's digest is checked against
the one the store recorded before anything is pushed for it: a target whose artifact
hashes otherwise (the store was altered) is refused and named, nothing is pushed for
it, the others are pushed, and the exit status is 1. Each artifact is tagged
r<the release that created the snapshot> under PREFIX/ENV/HOST/SERVICEID, as promote
tags it, and signed with --key (password from $COSIGN_PASSWORD). Revoked snapshots
are skipped. The release artifact (PREFIX/ENV/release) is not pushed: the store does
not record its digest (promote the release's commit for it).

When the release is the active one, every current pointer's delivery manifest is then
attached under PREFIX, as registry attach --registry PREFIX does. After republishing
release N for a rollback, roll back, then run registry attach.

The targets are read from the store in batches and pushed a few at a time: memory does
not grow with the release. Re-running is safe and finishes an interrupted run: an
artifact already tagged and signed by --key costs a tag look-up and a signature check
and is counted as present. Registry credentials come from the Docker config file.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkRegistryPrefix(prefix); err != nil {
				return usageError{err}
			}
			if release < 0 {
				return usageError{fmt.Errorf("--release %d: want a release number, or none for the active release", release)}
			}
			if rf.concurrency <= 0 {
				return usageError{fmt.Errorf("--concurrency %d: want a positive number of artifacts pushed at once", rf.concurrency)}
			}
			password, err := cosignPassword()
			if err != nil {
				return usageError{err}
			}
			signer, err := cosignkey.LoadPrivateKeyFile(key, password)
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			store, closeFn, err := sf.open(ctx)
			if err != nil {
				return err
			}
			defer closeFn()
			if store, err = store.WithSigner(signer); err != nil {
				return err
			}
			rc, err := rf.client()
			if err != nil {
				return err
			}
			jsonOut := outputJSON(cmd)
			pr := &republishProgress{w: cmd.OutOrStdout(), every: republishProgressEvery, last: time.Now(), env: env}
			if jsonOut {
				pr.w = cmd.ErrOrStderr()
			}
			res, err := promote.Republish(ctx, promote.RepublishOptions{EnvTag: env, Release: release, Store: store, Registry: rc,
				Prefix: prefix, Signer: signer, Progress: pr.report})
			if res == nil {
				return err
			}
			pr.done()
			rep := &republishReport{RepublishResult: res, KeyID: signer.KeyID()}
			if res.Attach != nil {
				rep.Attach = newAttachReport(env, res.Attach)
			}
			if rerr := report(cmd, rep, rep.text); rerr != nil && err == nil {
				err = rerr
			}
			return err
		},
	}
	sf.add(cmd, false)
	rf.add(cmd)
	outputFlag(cmd)
	f := cmd.Flags()
	f.StringVar(&env, "env", "", "environment tag (required)")
	f.Int64Var(&release, "release", 0, "republish this recorded release (default: the active one)")
	f.StringVar(&prefix, "registry", "", "HOST[:PORT]/PREFIX to push the artifacts to (required)")
	f.StringVar(&key, "key", "", "cosign.key signing the artifacts; its password is read from $COSIGN_PASSWORD (required)")
	f.IntVar(&rf.concurrency, "concurrency", 8, "artifacts pushed at once")
	for _, name := range []string{"env", "registry", "key"} {
		_ = cmd.MarkFlagRequired(name)
	}
	return cmd
}

// republishProgress prints, every republishProgressEvery and once at the
// end, how many artifacts a republish has handled: one line per interval,
// not per artifact, whatever the size of the release.
type republishProgress struct {
	mu            sync.Mutex
	w             io.Writer
	every         time.Duration
	last          time.Time
	env           string
	n, pushed     int
	printedPushed int
}

// report is called serialized by registry.Client.PublishSeq.
func (p *republishProgress) report(r registry.Result) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.n++
	if r.Pushed {
		p.pushed++
	}
	if time.Since(p.last) >= p.every {
		p.last = time.Now()
		p.line()
	}
}

func (p *republishProgress) line() {
	fmt.Fprintf(p.w, "republish %s: %d artifacts, %d pushed, %d present\n", p.env, p.n, p.pushed, p.n-p.pushed)
	p.printedPushed = p.pushed
}

// done prints the last count, unless the last line already said it.
func (p *republishProgress) done() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.n > 0 && (p.printedPushed != p.pushed || p.n != p.pushed) {
		p.line()
	}
}

// republishReport is what registry republish prints with --output json
// (docs/cli-output.md lists the fields).
type republishReport struct {
	*promote.RepublishResult
	KeyID  string        `json:"keyId"`
	Attach *attachReport `json:"attach,omitempty"` // as registry attach -o json; absent when no attach ran
}

// republishNamed is how many refused or skipped targets the text output
// names.
const republishNamed = 10

func (r *republishReport) text(w io.Writer) error {
	msg := fmt.Sprintf("%s release %d: %d targets to %s: %d pushed, %d already present and signed, %d signed, %d bytes uploaded (key %s)",
		r.EnvTag, r.Release, r.Targets, r.Registry, r.Pushed, r.AlreadyPresent, r.Signed, r.BytesUploaded, r.KeyID)
	if r.SkippedCount > 0 {
		msg += fmt.Sprintf("; %d skipped (revoked or never published: %s)", r.SkippedCount, textlist.Join(r.Skipped, r.SkippedCount, republishNamed))
	}
	if r.RefusedCount > 0 {
		msg += fmt.Sprintf("; %d REFUSED, nothing pushed for them (%s; first: %s)", r.RefusedCount,
			textlist.Join(r.Refused, r.RefusedCount, republishNamed), r.RefuseError)
	}
	switch {
	case r.Attach != nil:
		msg += fmt.Sprintf("; attached %d delivery manifests", r.Attach.AttachedCount)
		if r.Attach.FailedCount > 0 {
			msg += fmt.Sprintf(", %d failed (%s; first: %s)", r.Attach.FailedCount,
				textlist.Join(r.Attach.Failed, r.Attach.FailedCount, attachSkippedNamed), r.Attach.FailError)
		}
	case !r.Active:
		msg += fmt.Sprintf("; not attached: release %d is not active (after a rollback to it, run configpub registry attach --env %s --registry %s)",
			r.Release, r.EnvTag, r.Registry)
	}
	_, err := fmt.Fprintln(w, msg)
	return err
}
