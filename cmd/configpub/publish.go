package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/configpub/configpub/compiler"
	"github.com/configpub/configpub/internal/cosignkey"
	"github.com/configpub/configpub/internal/gitfs"
	"github.com/configpub/configpub/internal/policytree"
	"github.com/configpub/configpub/registry"
	"github.com/configpub/configpub/registry/compiled"
)

func addPublishCmd(root *cobra.Command) {
	var (
		rf                                  registryFlags
		repo, env, prefix, key, out, layout string
		ensureSigs, recheck                 bool
	)
	cmd := &cobra.Command{
		Use:   "publish --repo DIR --env ENV --registry HOST[:PORT]/PREFIX --key cosign.key",
		Short: "Compile the committed release and push every target and the release as signed OCI artifacts",
		Long: `publish compiles ENV from the policy repository (unless its release is already
published, below), refuses when the committed releases/ENV.yaml is stale, and
pushes one signed OCI artifact per target
(PREFIX/ENV/HOST/SERVICEID:r<releaseVersion>) plus the release artifact
(PREFIX/ENV/release:r<releaseVersion>). Artifacts already in the registry are
not uploaded again. The cosign key is decrypted once with $COSIGN_PASSWORD.
With --out it also writes OUT/ENV/HOST/SERVICEID/values.yml.

It prints each artifact's reference, REPOSITORY@sha256:<hex>, and the release
artifact's on a last line; pull and verify-oci take them as printed (-o json:
releaseArtifact and artifacts[].ref).

The release artifact is pushed last, once every target artifact is complete, so
it marks a whole publication. publish looks it up first, from the committed
release's files: when it is in place, publish compiles nothing, checks nothing
else and says the release is already published (one request). Use compile
--check to verify the sources. --recheck compiles the release and checks every
artifact — its tag, config and layer blobs, and a signature by --key that
verifies, with its payload (a few requests each) — pushing what is missing, for
example after something removed an artifact, a blob or a signature from the
registry. --ensure-signatures checks every tag and adds this key's signature
where it is missing.

Otherwise the release is compiled once for its manifest, which must be up to
date, then again host by host while its artifacts are pushed (and once more for
--out), so memory does not hold every artifact. As with compile, a source file
Git ignores and does not track is not read, and stderr names it.

With --oci-layout DIR nothing is sent to a registry: each repository is written as an
OCI image layout directory DIR/ENV/HOST/SERVICEID (and DIR/ENV/release) holding the
artifact tag and its cosign signature tag, signed for the repositories under --registry,
for an air-gapped transfer with ` + "`oras cp --from-oci-layout`" + `.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if repo == "" || env == "" || prefix == "" || key == "" {
				return usageError{errors.New("--repo, --env, --registry and --key are required")}
			}
			if err := checkRegistryPrefix(prefix); err != nil {
				return usageError{err}
			}
			if rf.concurrency <= 0 { // the client reads it as its default, 8
				return usageError{fmt.Errorf("--concurrency %d: want a positive number of artifacts pushed at once", rf.concurrency)}
			}
			password, err := cosignPassword()
			if err != nil {
				return err
			}
			tree, err := policytree.Dir(repo, policytree.Limits{})
			if err != nil {
				return err
			}
			defer tree.Close()
			c, err := rf.client()
			if layout != "" {
				c, err = registry.New(registry.Options{Concurrency: rf.concurrency, Storage: registry.OCILayout(layout, prefix)})
			}
			if err != nil {
				return err
			}
			// The committed release's files name its release artifact:
			// when it is in place, nothing is compiled (unless --out needs
			// the targets, or every artifact is to be checked).
			if out == "" && !recheck && !ensureSigs {
				if r, rel, ok := compiled.FindPublished(cmd.Context(), c, prefix, tree, env); ok {
					signer, err := cosignkey.LoadPrivateKeyFile(key, password)
					if err != nil {
						return err
					}
					return reportPublished(cmd, env, rel.ReleaseVersion, prefix, layout, signer.KeyID(), r, false)
				}
			}
			// Compile only compares here (CheckOnly): a stale release is
			// refused below, and no next release is compiled. Nothing needs
			// every target at once: the release is compiled for its
			// manifest, then again host by host while --out is written and
			// while its artifacts are pushed (compiled.Stream).
			// The sources compile reads: not what Git ignores.
			ignored, err := gitIgnored(repo)
			if err != nil {
				return err
			}
			res, err := compiler.Compile(cmd.Context(), tree, compiler.Options{EnvTag: env, CreatedAt: time.Unix(0, 0).UTC(),
				PreviousTree: gitfs.ReleaseTrees(repo, "HEAD"), Introduced: introducedTree(repo), ManifestOnly: true, CheckOnly: true,
				Ignored: ignored})
			if err != nil {
				return err
			}
			warnIgnored(cmd.ErrOrStderr(), res.Ignored)
			if err := res.Stale(); err != nil {
				return fmt.Errorf("publish %s: run `configpub compile` and commit first: %w", env, err)
			}
			if out != "" {
				if err := compiler.Write(cmd.Context(), res, "", out); err != nil {
					return err
				}
			}
			signer, err := cosignkey.LoadPrivateKeyFile(key, password)
			if err != nil {
				return err
			}
			w := cmd.OutOrStdout()
			jsonOut := outputJSON(cmd)
			total := res.TargetCount() + 1
			progress := newProgress(w, total)
			if jsonOut {
				progress = newProgress(io.Discard, total)
			}
			progress.layout, progress.prefix = layout, prefix
			// The report lists every artifact only for -o json; the text
			// report needs the release artifact's line.
			var results []registry.Result
			sum, present, err := compiled.PublishRelease(cmd.Context(), c, res, registry.PublishRequest{
				Prefix: prefix, Signer: signer, EnsureSignatures: ensureSigs,
				Progress: func(r registry.Result) {
					progress.report(r)
					if jsonOut || r.Kind == registry.KindRelease {
						results = append(results, r)
					}
				},
			}, recheck)
			if present != nil {
				return reportPublished(cmd, env, res.Manifest.ReleaseVersion, prefix, layout, signer.KeyID(), *present, true)
			}
			progress.done()
			if sum == nil {
				return err
			}
			rep := newPublishReport(env, res.Manifest.ReleaseVersion, prefix, signer.KeyID(), sum, results)
			rep.Compiled, rep.OCILayout = true, layout
			if perr := report(cmd, rep, rep.text); perr != nil && err == nil {
				err = perr
			}
			return err
		},
	}
	f := cmd.Flags()
	f.StringVar(&repo, "repo", "", "policy repository directory (required)")
	f.StringVar(&env, "env", "", "environment tag (required)")
	f.StringVar(&prefix, "registry", "", "HOST[:PORT]/PREFIX the repositories are created under (required)")
	f.StringVar(&key, "key", "", "cosign.key; its password is read from $COSIGN_PASSWORD (required)")
	f.StringVar(&out, "out", "", "also write OUT/ENV/HOST/SERVICEID/values.yml")
	f.IntVar(&rf.concurrency, "concurrency", 8, "artifacts pushed at once")
	f.StringVar(&layout, "oci-layout", "", "write OCI image layout directories under this directory instead of pushing (copy them with oras cp --from-oci-layout)")
	f.BoolVar(&ensureSigs, "ensure-signatures", false, "also add this key's signature to artifacts already published (after a key rotation)")
	f.BoolVar(&recheck, "recheck", false, "compile and check every artifact even when the release artifact shows the release is already published")
	rf.add(cmd)
	outputFlag(cmd)
	root.AddCommand(cmd)
}

// progress prints one line per artifact, or a single updating bar when
// the output is a terminal.
type progress struct {
	w     io.Writer
	tty   bool
	total int
	n     int
	// layout is --oci-layout (prefix is --registry): each artifact is
	// written there, not pushed, and its line names the directory and the
	// tags to copy.
	layout, prefix string
}

func newProgress(w io.Writer, total int) *progress {
	f, ok := w.(*os.File)
	return &progress{w: w, tty: ok && term.IsTerminal(int(f.Fd())), total: total}
}

// report is called serialized by registry.Publish.
func (p *progress) report(r registry.Result) {
	p.n++
	if p.tty {
		const width = 30
		filled := width * p.n / p.total
		fmt.Fprintf(p.w, "\r[%s%s] %d/%d", strings.Repeat("=", filled), strings.Repeat(" ", width-filled), p.n, p.total)
		return
	}
	if p.layout != "" {
		state := "present"
		if r.Pushed {
			state = "written"
		}
		fmt.Fprintf(p.w, "%s %s: tags %s and %s (%d bytes), for %s\n", state, layoutDir(p.layout, p.prefix, r.Repository),
			r.Tag, signatureTag(r.Digest), r.Bytes, r.Ref())
		return
	}
	state := "present"
	if r.Pushed {
		state = "pushed "
	}
	fmt.Fprintf(p.w, "%s %s (%s, %d bytes uploaded)\n", state, r.Ref(), r.Tag, r.Bytes)
}

// layoutDir is the OCI layout directory publish --oci-layout writes
// repository into (registry.OCILayout).
func layoutDir(layout, prefix, repository string) string {
	return filepath.Join(layout, filepath.FromSlash(strings.TrimPrefix(repository, strings.TrimSuffix(prefix, "/")+"/")))
}

// signatureTag is the tag of the cosign signature of the manifest digest.
func signatureTag(digest string) string {
	return strings.Replace(digest, ":", "-", 1) + ".sig"
}

func (p *progress) done() {
	if p.tty && p.n > 0 {
		fmt.Fprintln(p.w)
	}
}
