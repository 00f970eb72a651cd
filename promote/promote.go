package promote

import (
	"context"
	"crypto"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"iter"
	"log/slog"
	"time"

	git "github.com/go-git/go-git/v5"
	digest "github.com/opencontainers/go-digest"

	"github.com/configpub/configpub/bundle"
	"github.com/configpub/configpub/compiler"
	"github.com/configpub/configpub/internal/gitfs"
	"github.com/configpub/configpub/internal/signing"
	"github.com/configpub/configpub/promote/review"
	"github.com/configpub/configpub/promoter"
	"github.com/configpub/configpub/registry"
)

// Recorder records and activates a release; *promoter.Store satisfies it.
type Recorder interface {
	RecordAndActivate(ctx context.Context, in promoter.ReleaseInput) (*promoter.ActivationResult, error)
}

// Publisher publishes and verifies OCI artifacts; *registry.Client
// satisfies it.
type Publisher interface {
	PublishSeq(ctx context.Context, req registry.PublishRequest, artifacts iter.Seq2[registry.Artifact, error]) (*registry.Summary, error)
	Verify(ctx context.Context, ref string, opts registry.VerifyOptions) (*registry.Verified, error)
}

var (
	_ Recorder  = (*promoter.Store)(nil)
	_ Publisher = (*registry.Client)(nil)
)

// Options configures Run. Store, Registry, RegistryPrefix,
// Signer and EnvTag are required; every other field has a documented default.
type Options struct {
	// EnvTag is the environment to promote (releases/<EnvTag>.yaml).
	EnvTag string
	// Dir is the policy repository's directory in the Git repository,
	// slash-separated (a monorepo's "policy"). Default: its root. Every
	// read of the commit and of its history (the sources, the release
	// files, the releases caught up) is of that directory.
	Dir string
	// Review selects the protected ref (default refs/heads/main), the commit
	// (default the ref's tip) and the review requirements.
	Review review.Options
	// Store records and activates the release (a *promoter.Store).
	Store Recorder
	// Registry publishes and verifies the artifacts (a *registry.Client).
	Registry Publisher
	// RegistryPrefix is "registry[:port][/path]".
	RegistryPrefix string
	// Signer signs the OCI artifacts (the cosign key).
	Signer crypto.Signer
	// TrustedKeys verify the published artifacts. Default: the Signer's
	// public key.
	TrustedKeys []signing.TrustedKey
	// Clock times the promotion for the result. Default time.Now.
	Clock func() time.Time
	// Logger receives one record per step (no configuration bodies).
	// Default: discard.
	Logger *slog.Logger
	// Stage records the release as STAGED and moves nothing (`promote
	// --stage`); activate it later with promoter.Store.ActivateRelease. An environment
	// with two-phase activation is always staged.
	Stage bool
	// BreakGlass overrides a freeze window of the environment;
	// BreakGlassReason is required with it and journaled as the release's
	// reason.
	BreakGlass       bool
	BreakGlassReason string
	// NoCatchUp promotes only the commit asked for. By default, when the
	// store has not recorded the releases between its latest one and the
	// one the commit's release is built on (a promotion that never ran:
	// a CI run cancelled while newer commits queued, a runner lost), Run
	// first publishes and records each of them in order from the commit
	// of the first-parent history that holds it — recorded, neither
	// activated nor staged, so that the pointers move once, from the
	// active release to the commit's, never through a release superseded
	// before it ran (as Flux applies the newest commit, not each one).
	NoCatchUp bool

	// recordOnly records the release without activating or staging it
	// (promoter.Store.Record): how catchUp promotes the releases before
	// the one asked for.
	recordOnly bool
}

// CaughtUp is a release Run recorded first (published and recorded, not
// activated), from an earlier commit of the first-parent history, because
// the release asked for is built on it and the store had not recorded it.
type CaughtUp struct {
	ReleaseVersion int64  `json:"releaseVersion"`
	Commit         string `json:"commit"`
	// Result is that promotion's result.
	Result *Result `json:"result"`
}

// Result is the outcome of a promotion.
type Result struct {
	Review         *review.Review    `json:"review"`
	EnvTag         string            `json:"envTag"`
	ReleaseVersion int64             `json:"releaseVersion"`
	BaseRelease    int64             `json:"baseRelease"`
	ReleaseDigest  string            `json:"releaseDigest"`
	CommandID      string            `json:"commandId"`
	Published      []registry.Result `json:"published"` // every target artifact, then the release artifact
	// Resigned counts the artifacts, published before under another key,
	// that this promotion signed with its key too (the first promotion
	// after a key rotation signs every target the release did not change):
	// a key the store recorded as it signed (configpub.signing_key) and no
	// longer trusts, named in RotatedFrom. A store that records no keys (a
	// database before migration 29) counts here whatever key signed them.
	Resigned int64 `json:"resigned,omitempty"`
	// RotatedFrom names, in order, the recorded keys that had signed the
	// Resigned artifacts.
	RotatedFrom []string `json:"rotatedFrom,omitempty"`
	// Replaced counts the artifacts published before whose signatures are
	// by no key the store recorded, which this promotion signed (their
	// content is what the commit compiles to): not a key rotation — the
	// store's signatures were replaced in the registry by another key's —
	// something to look into.
	Replaced int64 `json:"replaced,omitempty"`
	// Unsigned counts the artifacts published before that carried no
	// signature at all (deleted from the registry, or never pushed), which
	// this promotion signed: not a key rotation, something to look into.
	Unsigned int64 `json:"unsigned,omitempty"`
	// CaughtUp lists the releases promoted first, oldest first (see
	// Options.NoCatchUp).
	CaughtUp []CaughtUp `json:"caughtUp,omitempty"`
	// Activation is the store's result; Replayed is true when this command
	// had already been applied. Nil when AlreadyActiveFrom is set or the
	// release was staged.
	Activation *promoter.ActivationResult `json:"activation,omitempty"`
	// Staged is the store's result when the release was staged (--stage,
	// or an environment with two-phase activation).
	Staged *promoter.StageResult `json:"staged,omitempty"`
	// Recorded is the store's result for a release caught up (recorded,
	// neither activated nor staged: see Options.NoCatchUp).
	Recorded *promoter.RecordResult `json:"recorded,omitempty"`
	// AlreadyActiveFrom is set when the environment's current release is
	// already this exact release (byte-identical manifest), activated from
	// the named other commit; nothing was written.
	AlreadyActiveFrom string `json:"alreadyActiveFrom,omitempty"`
	// AlreadyRecordedFrom is set when this exact release (byte-identical
	// manifest) is the environment's latest recorded release, recorded from
	// the named other commit, but is not active (it was rolled back):
	// RecordedState and ActiveRelease say where things stand; nothing was
	// written, and `activate` is the explicit way back to it.
	AlreadyRecordedFrom string `json:"alreadyRecordedFrom,omitempty"`
	RecordedState       string `json:"recordedState,omitempty"`
	ActiveRelease       int64  `json:"activeRelease,omitempty"`
	// Duration is how long the promotion took (JSON: nanoseconds).
	Duration time.Duration `json:"durationNs"`
}

// Run promotes a reviewed commit to an environment: it
// checks the review (a *review.RefusalError otherwise), compiles the
// commit's tree and requires the committed release manifest to be exactly
// what its sources compile to (*StaleManifestError, matching promoter.ErrStale,
// otherwise; nothing is written anywhere), publishes and signs every target
// artifact and the release artifact (idempotent), storing the artifacts'
// bytes in the store as they stream, and verifies each by digest against
// the trusted keys, then records and activates the release
// in the store under the command CommandID(commit, env). Re-running
// the same promotion replays the recorded result; promoting another commit
// whose release manifest is byte-identical to the active release's is a
// no-op (Result.AlreadyActiveFrom). A lost compare-and-swap matches
// promoter.ErrConflict; an unknown outcome matches promoter.ErrUnconfirmed.
func Run(ctx context.Context, repo *git.Repository, opts Options) (*Result, error) {
	if err := opts.validate(); err != nil {
		return nil, err
	}
	clock := opts.Clock
	if clock == nil {
		clock = time.Now
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	start := clock()

	rev, err := review.Check(ctx, repo, opts.Review)
	if err != nil {
		return nil, fmt.Errorf("promote %s: %w", opts.EnvTag, err)
	}
	log.InfoContext(ctx, "commit reviewed", "commit", rev.Commit, "ref", rev.Ref, "reviewers", len(rev.Reviewers))

	var caught []CaughtUp
	if !opts.NoCatchUp {
		if caught, err = catchUp(ctx, repo, opts, log, rev); err != nil {
			return nil, err
		}
	}
	res, err := compileAt(ctx, repo, rev, opts.EnvTag, opts.Dir, previousFrom(opts.Store))
	if err != nil {
		return nil, err
	}
	m := res.Manifest
	log.InfoContext(ctx, "release manifest up to date", "env", opts.EnvTag, "release", m.ReleaseVersion, "base", m.BaseReleaseVersion, "targets", len(m.Targets))

	in := releaseInput(rev, res, opts.EnvTag)
	// The release archive (65 MB at 100,000 targets) is read again from
	// the commit to record the release, once the compile result is let
	// go of, not held while the release publishes.
	res.LetGoOfArchive()
	archive := res.ArchiveAgain()
	if opts.BreakGlass && opts.BreakGlassReason == "" {
		return nil, fmt.Errorf("promote %s: %w", opts.EnvTag, invalid("reason", "--break-glass needs a reason"))
	}
	inForce, active, err := rolloutInForce(ctx, opts.Store, opts.EnvTag)
	if err != nil {
		return nil, fmt.Errorf("promote %s@%s: %w", opts.EnvTag, short(rev.Commit), err)
	}
	// The freeze windows are checked now, before an hour of publishing,
	// and again by the store in the transaction that records and
	// activates the release, under the environment's lock: that check
	// decides whether the pointers move.
	reason, err := promoter.CheckFreezeInForce(opts.EnvTag, &res.Rollout, inForce, active, clock(), opts.BreakGlass, opts.BreakGlassReason)
	if err != nil {
		return nil, fmt.Errorf("promote %s@%s: %w", opts.EnvTag, short(rev.Commit), err)
	}
	// Two-phase activation holds when the release's policy or the active
	// release's asks for it: a release cannot lift the policy it is
	// activated under.
	stage := opts.Stage || res.Rollout.TwoPhase() || inForce.TwoPhase()
	if reason != opts.BreakGlassReason {
		log.InfoContext(ctx, "freeze window broken", "env", opts.EnvTag, "reason", reason)
	}
	if opts.BreakGlass {
		// The store settles, under the environment's lock, which window
		// the recording (and activation) breaks and journals it; the
		// command's hash covers in.Reason, so the same promotion re-run
		// once the window has closed is the same command.
		in.BreakGlassReason = opts.BreakGlassReason
	}
	// A release only recorded is, like a staged one, not activated now:
	// refused only when its windows have ended.
	published, signed, err := publishAndStore(ctx, opts, log, clock, res, &in, stage || opts.recordOnly)
	if err != nil {
		return nil, err
	}
	log.InfoContext(ctx, "artifacts published and verified", "artifacts", len(published), "resigned", signed.Resigned,
		"replaced", signed.Replaced, "unsigned", signed.Unsigned)

	result := &Result{
		CaughtUp:       caught,
		Review:         rev,
		EnvTag:         opts.EnvTag,
		ReleaseVersion: m.ReleaseVersion,
		BaseRelease:    m.BaseReleaseVersion,
		ReleaseDigest:  m.ReleaseDigest,
		CommandID:      in.CommandID,
		Published:      published,
		Resigned:       signed.Resigned,
		RotatedFrom:    signed.RotatedFrom,
		Replaced:       signed.Replaced,
		Unsigned:       signed.Unsigned,
	}
	views := promoter.WorkflowViewsOf(res.Workflows)
	// Nothing of the compile result is used from here on (in holds every
	// target's store fields; archive reads the release's bytes again):
	// record in a function of its own so that the result — a large
	// release's parsed sources, model and manifests, hundreds of megabytes
	// at 100,000 targets — can be collected before the archive is read and
	// while the release is recorded.
	return record(ctx, opts, log, clock, start, stage, in, archive, views, result)
}

// record reads the release's archive with archive, stages its Workflow
// views and records the published release (staged, or recorded and
// activated), and completes result.
func record(ctx context.Context, opts Options, log *slog.Logger, clock func() time.Time, start time.Time, stage bool,
	in promoter.ReleaseInput, archive func() ([]byte, error), views []promoter.WorkflowView, result *Result) (*Result, error) {
	rev := result.Review
	var err error
	if in.ManifestBytes, err = archive(); err != nil {
		return nil, fmt.Errorf("promote %s@%s: %w", opts.EnvTag, short(rev.Commit), err)
	}
	if err := stageWorkflowViews(ctx, opts.Store, in.ManifestBytes, views); err != nil {
		return nil, fmt.Errorf("promote %s@%s: %w", opts.EnvTag, short(rev.Commit), err)
	}
	if opts.recordOnly {
		rs, ok := opts.Store.(releaseRecorder)
		if !ok {
			return nil, fmt.Errorf("promote %s: the store cannot record releases without activating them: %w", opts.EnvTag, promoter.ErrInvalid)
		}
		in.CommandID = RecordCommandID(rev.Commit, opts.EnvTag)
		result.CommandID = in.CommandID
		rec, err := rs.Record(ctx, in)
		if err != nil {
			return nil, fmt.Errorf("promote %s@%s: %w", opts.EnvTag, short(rev.Commit), err)
		}
		log.InfoContext(ctx, "release recorded, not activated", "env", opts.EnvTag, "release", rec.ReleaseVersion, "replayed", rec.Replayed)
		result.Recorded = rec
		result.Duration = clock().Sub(start)
		return result, nil
	}
	if stage {
		st, ok := opts.Store.(releaseStager)
		if !ok {
			return nil, fmt.Errorf("promote %s: the store cannot stage releases: %w", opts.EnvTag, promoter.ErrInvalid)
		}
		in.CommandID = StageCommandID(rev.Commit, opts.EnvTag)
		result.CommandID = in.CommandID
		staged, err := st.Stage(ctx, in)
		if err != nil {
			return nil, fmt.Errorf("promote %s@%s: %w", opts.EnvTag, short(rev.Commit), err)
		}
		log.InfoContext(ctx, "release staged", "env", opts.EnvTag, "release", staged.ReleaseVersion, "moving", staged.Moving, "replayed", staged.Replayed)
		result.Staged = staged
		result.Duration = clock().Sub(start)
		return result, nil
	}
	act, err := opts.Store.RecordAndActivate(ctx, in)
	var fe *promoter.FreezeError
	if errors.As(err, &fe) {
		// Not open when Run checked before publishing: it opened since.
		// (err's message is made: fe is wrapped again, saying so.)
		fe.Written = fmt.Sprintf("the window opened after the check before publishing, and its %d artifacts are published "+
			"(promoting it again once the window has closed uploads none of them again)", len(result.Published))
		return nil, fmt.Errorf("promote %s@%s (command %s): %w", opts.EnvTag, short(rev.Commit), in.CommandID, fe)
	}
	if err != nil {
		rec, serr := alreadyRecorded(ctx, opts.Store, err, opts.EnvTag, in.ReleaseVersion, in.ManifestBytes)
		if serr != nil {
			return nil, fmt.Errorf("promote %s@%s: %w (and reading the store's status: %v)", opts.EnvTag, short(rev.Commit), err, serr)
		}
		if rec == nil {
			return nil, fmt.Errorf("promote %s@%s: %w", opts.EnvTag, short(rev.Commit), err)
		}
		if rec.State == promoter.StateActive {
			log.InfoContext(ctx, "release already active", "env", opts.EnvTag, "release", in.ReleaseVersion, "from", rec.SourceCommit)
			result.AlreadyActiveFrom = rec.SourceCommit
		} else {
			log.InfoContext(ctx, "release already recorded, not active", "env", opts.EnvTag, "release", in.ReleaseVersion,
				"from", rec.SourceCommit, "state", rec.State, "active", rec.Active)
			result.AlreadyRecordedFrom, result.RecordedState, result.ActiveRelease = rec.SourceCommit, rec.State, rec.Active
		}
		result.Duration = clock().Sub(start)
		return result, nil
	}
	log.InfoContext(ctx, "release active", "env", opts.EnvTag, "release", act.ReleaseVersion, "moved", act.Moved, "replayed", act.Replayed)
	result.Activation = act
	result.Duration = clock().Sub(start)
	return result, nil
}

// rolloutReader is the optional part of the store Run reads the active
// release's rollout policy from; *Store satisfies it.
type rolloutReader interface {
	RolloutInForce(ctx context.Context, envTag string) (*bundle.Rollout, int64, error)
}

var _ rolloutReader = (*promoter.Store)(nil)

// rolloutInForce is the rollout policy of envTag's active release in store
// and that release (promoter.Store.RolloutInForce); nil when the store
// cannot say.
func rolloutInForce(ctx context.Context, store any, envTag string) (*bundle.Rollout, int64, error) {
	rr, ok := store.(rolloutReader)
	if !ok {
		return nil, 0, nil
	}
	return rr.RolloutInForce(ctx, envTag)
}

// headReader is the optional part of the store catchUp reads; *Store
// satisfies it.
type headReader interface {
	Head(ctx context.Context, envTag string) (head, pending int64, err error)
}

var _ headReader = (*promoter.Store)(nil)

// catchUp records, oldest first, the releases between the store's latest
// recorded release and the one the release of rev's commit is built on,
// each from the commit of rev's first-parent history that holds it (the
// same options, that commit asked for, published and recorded without
// activating or staging it), and returns them. A release in the
// history the store has not recorded is a promotion that never ran; without
// it the commit's release cannot be verified or recorded. First, before
// anything is written, the commit's own release is checked against its base
// as committed (what the catching up records), with the protected ref and
// the freeze windows: a refusal of the commit refuses before catching up.
// Nothing is done when the commit holds no release, the store is up to its
// base, or the store cannot say its head.
func catchUp(ctx context.Context, repo *git.Repository, opts Options, log *slog.Logger, rev *review.Review) ([]CaughtUp, error) {
	hr, ok := opts.Store.(headReader)
	if !ok {
		return nil, nil
	}
	fsys, _, err := review.CommitDirFS(repo, rev.Commit, opts.Dir)
	if err != nil {
		return nil, fmt.Errorf("promote %s@%s: %w", opts.EnvTag, short(rev.Commit), err)
	}
	root, err := compiler.ReadCommittedRoot(fsys, opts.EnvTag)
	want := root.ReleaseVersion
	if err != nil || want == 0 {
		return nil, nil // the compile says what is wrong with it
	}
	head, _, err := hr.Head(ctx, opts.EnvTag)
	if err != nil {
		return nil, fmt.Errorf("promote %s@%s: %w", opts.EnvTag, short(rev.Commit), err)
	}
	if head+1 >= want {
		return nil, nil
	}
	// Before anything is written: the commit's own release must be what
	// its sources and its base as committed (the very bytes the catching
	// up records) derive, for the environment's protected ref, outside a
	// freeze window — else it is refused now, as without catching up.
	fromGit := func(ctx context.Context, env string, v int64) ([]byte, error) {
		tree, err := gitfs.RepoReleaseTrees(repo, opts.Dir, rev.Commit)(ctx, env, v)
		if err != nil {
			return nil, err
		}
		return compiler.CommittedRelease(tree, env)
	}
	res, err := compileAt(ctx, repo, rev, opts.EnvTag, opts.Dir, fromGit)
	if err != nil {
		return nil, err
	}
	clock := opts.Clock
	if clock == nil {
		clock = time.Now
	}
	inForce, active, err := rolloutInForce(ctx, opts.Store, opts.EnvTag)
	if err != nil {
		return nil, fmt.Errorf("promote %s@%s: %w", opts.EnvTag, short(rev.Commit), err)
	}
	if _, err := promoter.CheckFreezeInForce(opts.EnvTag, &res.Rollout, inForce, active, clock(), opts.BreakGlass, opts.BreakGlassReason); err != nil {
		return nil, fmt.Errorf("promote %s@%s: %w", opts.EnvTag, short(rev.Commit), err)
	}
	res = nil // let go before the releases below compile
	var caught []CaughtUp
	for v := head + 1; v < want; v++ {
		c, err := gitfs.ReleaseCommit(ctx, repo, opts.Dir, rev.Commit, opts.EnvTag, v)
		if err != nil {
			return caught, fmt.Errorf("promote %s@%s: release %d is built on release %d, which the store has not recorded (its latest is %d), and it cannot be caught up: %w",
				opts.EnvTag, short(rev.Commit), want, want-1, head, err)
		}
		log.InfoContext(ctx, "catching up a release the store has not recorded", "env", opts.EnvTag, "release", v, "commit", c)
		sub := opts
		sub.NoCatchUp, sub.recordOnly = true, true
		sub.Review.Commit = c
		r, err := Run(ctx, repo, sub)
		if errors.Is(err, promoter.ErrStale) {
			// The newest commit holding the release changed sources
			// without compiling it: the commit that introduced the
			// release is compiled from its sources.
			if first, ferr := gitfs.IntroducingCommit(ctx, repo, opts.Dir, c, opts.EnvTag); ferr == nil && first != c {
				log.InfoContext(ctx, "the newest commit holding the release is stale; catching it up from the commit that introduced it",
					"env", opts.EnvTag, "release", v, "stale", c, "commit", first)
				c, sub.Review.Commit = first, first
				r, err = Run(ctx, repo, sub)
			}
		}
		if err != nil {
			hint := ""
			if at, herr := gitfs.ReleaseCommit(ctx, repo, opts.Dir, rev.Commit, opts.EnvTag, head); herr == nil && head > 0 && len(caught) == 0 {
				// Without release v, the change promotes only rebuilt on
				// the store's latest release.
				hint = fmt.Sprintf(" (to promote the change without it, rebuild it on release %d, the store's latest: configpub compile --base-ref %s, on a branch)",
					head, short(at))
			}
			return caught, fmt.Errorf("promote %s@%s: catching up release %d from %s first: %w%s%s", opts.EnvTag, short(rev.Commit), v, short(c), err, hint,
				recordedBefore(caught, v))
		}
		caught = append(caught, CaughtUp{ReleaseVersion: v, Commit: c, Result: r})
	}
	return caught, nil
}

// recordedBefore says which releases a catch-up recorded before release v
// failed ("" when none): the failure's "nothing written" is about v only.
func recordedBefore(caught []CaughtUp, v int64) string {
	switch len(caught) {
	case 0:
		return ""
	case 1:
		return fmt.Sprintf(" (release %d was recorded by this run before it, not activated; a run again continues from release %d)",
			caught[0].ReleaseVersion, v)
	}
	return fmt.Sprintf(" (releases %d to %d were recorded by this run before it, not activated; a run again continues from release %d)",
		caught[0].ReleaseVersion, caught[len(caught)-1].ReleaseVersion, v)
}

// releaseRecorder is the part of the store catchUp records releases
// with; *Store satisfies it.
type releaseRecorder interface {
	Record(ctx context.Context, in promoter.ReleaseInput) (*promoter.RecordResult, error)
}

var _ releaseRecorder = (*promoter.Store)(nil)

// releaseStager is the part of the store `promote --stage` uses; *Store
// satisfies it.
type releaseStager interface {
	Stage(ctx context.Context, in promoter.ReleaseInput) (*promoter.StageResult, error)
}

var _ releaseStager = (*promoter.Store)(nil)

// statusReader is the optional part of the store Run uses to tell "this
// exact release is already active from another commit" from a lost race.
type statusReader interface {
	StatusHead(ctx context.Context, envTag string) (*promoter.Status, error)
}

// recordedRelease is what alreadyRecorded found.
type recordedRelease struct {
	SourceCommit string
	State        string
	Active       int64
}

// alreadyRecorded reports whether err is a lost compare-and-swap only
// because the environment's latest recorded release is this very release —
// same version, byte-identical definition — recorded from another commit
// (for example a later commit on main that changed no policy input, whether
// or not the release was rolled back since). It returns that release's
// commit, state and the active release. Any other case, or a store without
// Status, is nil.
func alreadyRecorded(ctx context.Context, store Recorder, err error, env string, version int64, manifest []byte) (*recordedRelease, error) {
	var cas *promoter.CASError
	sr, ok := store.(statusReader)
	if !ok || !errors.As(err, &cas) || cas.Pending != 0 || cas.Actual != version {
		return nil, nil
	}
	st, serr := sr.StatusHead(ctx, env)
	if serr != nil {
		return nil, serr
	}
	want := digest.FromBytes(manifest).String()
	for _, r := range st.Releases {
		if r.ReleaseVersion == version && r.DefinitionHash == want {
			return &recordedRelease{SourceCommit: r.SourceCommit, State: r.State, Active: st.CurrentRelease}, nil
		}
	}
	return nil, nil
}

func (o *Options) validate() error {
	switch {
	case o.EnvTag == "":
		return invalid("envTag", "empty")
	case o.Store == nil:
		return invalid("store", "nil")
	case o.Registry == nil:
		return invalid("registry", "nil")
	case o.RegistryPrefix == "":
		return invalid("registryPrefix", "empty")
	case o.Signer == nil:
		return invalid("signer", "nil")
	}
	o.Dir = review.CleanDir(o.Dir)
	if o.Dir != "" && !fs.ValidPath(o.Dir) {
		return invalid("dir", "%q is not a directory inside the Git repository (a relative path without ..)", o.Dir)
	}
	return nil
}

// compileAt compiles the policy repository at directory dir of the tree
// of the reviewed commit and requires the committed release manifest to be
// exactly what the sources and the previous release as recorded in the
// store (prev) derive.
func compileAt(ctx context.Context, repo *git.Repository, rev *review.Review, env, dir string, prev compiler.PreviousRelease) (*compiler.Result, error) {
	fsys, commitTime, err := review.CommitDirFS(repo, rev.Commit, dir)
	if err != nil {
		return nil, fmt.Errorf("promote %s@%s: %w", env, short(rev.Commit), err)
	}
	// CheckOnly: a stale release is refused, so no next release is
	// compiled (CreatedAt only matters for one, which a committed release
	// that cannot be verified still compiles; the commit time keeps that
	// path deterministic). ManifestOnly: releaseInput takes the targets
	// host by host.
	res, err := compiler.Compile(ctx, fsys, compiler.Options{EnvTag: env, CreatedAt: commitTime, Previous: prev, ManifestOnly: true, CheckOnly: true})
	if err != nil {
		if errors.Is(err, compiler.ErrStale) {
			return nil, &StaleManifestError{Commit: rev.Commit, EnvTag: env, Err: err}
		}
		return nil, fmt.Errorf("promote %s@%s: compile: %w", env, short(rev.Commit), err)
	}
	// The review refusal first: a commit for another protected ref is not
	// reviewed, whatever its manifest.
	if res.ProtectedRef != "" && review.RefName(res.ProtectedRef) != rev.Ref {
		return nil, &review.RefusalError{Commit: rev.Commit, Ref: rev.Ref, Err: review.ErrNotProtectedRef,
			Reason: fmt.Sprintf("the policy repository declares protectedRef %s in %s, the promoter is configured with %s", res.ProtectedRef, compiler.RepositoryFile, rev.Ref)}
	}
	if err := res.Stale(); err != nil {
		return nil, &StaleManifestError{Commit: rev.Commit, EnvTag: env, Err: err}
	}
	return res, nil
}
