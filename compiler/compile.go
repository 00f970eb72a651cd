package compiler

import (
	"bytes"
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/configpub/configpub/bundle"
	"github.com/configpub/configpub/internal/digest"
	"github.com/configpub/configpub/internal/parallel"
	"github.com/configpub/configpub/internal/policytree"
	"github.com/configpub/configpub/internal/render"
	"github.com/configpub/configpub/internal/safetext"
	"github.com/configpub/configpub/schemas"
)

// Options are the release parameters of a compile.
type Options struct {
	// EnvTag selects the environment to compile. Required.
	EnvTag string
	// CreatedAt is the createdAt of a NEW release (when the sources no
	// longer compile to the committed manifest). The caller resolves it:
	// --created-at, else SOURCE_DATE_EPOCH, else the policy repository's HEAD
	// commit time. Zero is valid while nothing changed; a new release with a
	// zero CreatedAt fails with ErrCreatedAtRequired. Truncated to seconds,
	// UTC.
	CreatedAt time.Time
	// Previous returns the trusted previous release: the manifest of
	// release N-1 as recorded (Git history at compile and --check time, the
	// store at promote time), against which the committed release N is
	// re-derived. Nil: no history is available, so a committed release
	// N > 1 cannot be verified (Result.Stale reports it).
	Previous PreviousRelease
	// PreviousTree, when set, is used instead of Previous: it returns the
	// policy tree in which release N-1 is recorded (Git history: the tree
	// of the commit that recorded it), whose release files are read there
	// one at a time, as the committed release's are, rather than held
	// whole while release N derives.
	PreviousTree PreviousTree
	// Introduced, when set, returns the policy tree the committed release
	// was compiled from, so that a stale release names the inputs edited
	// since (see IntroducedTree). nil: they are named from the release
	// manifest alone — the inputs its root lists, and the hosts whose own
	// inputs changed.
	Introduced IntroducedTree
	// ManifestOnly: the caller needs the release manifest only (its
	// target entries: identity, snapshot, digests, changed), not the
	// compiled targets. Every target is still rendered and validated, host
	// by host, but Result.Targets is nil and nothing of a target outlives
	// its host, so memory does not hold every artifact of a large
	// environment. Write with an output directory refuses such a result.
	ManifestOnly bool
	// Keep, with ManifestOnly, selects the targets whose compiled bodies
	// the result keeps after all: Result.Targets then holds, in manifest
	// order, the targets whose manifest entry Keep accepts (Changed as the
	// release states it), and no other. Keep is called by the host workers
	// concurrently, once per target of every derivation, with the entry
	// before its Changed is final. `configpub plan` keeps the targets that
	// differ from the base release (PlanKeep), so that the head compile
	// need not run again for them.
	Keep func(*bundle.TargetEntry) bool
	// Committed is the tree the committed release is read from, when it is
	// not the tree compiled: `configpub compile --base-ref` reads the
	// release of the branch a change is merged onto, so that a branch that
	// compiled before builds its one release on that branch's release
	// again instead of on its own. nil: the tree compiled. Previous or
	// PreviousTree must then find that release's predecessor.
	Committed fs.FS
	// CheckOnly: the caller only asks whether the committed release is up
	// to date (`configpub compile --check`). When it is not, the result is
	// the re-derivation of the committed release with Stale saying why;
	// the next release, which only `configpub compile` writes, is not
	// compiled.
	CheckOnly bool
	// Renew compiles the next release also when the committed release is
	// up to date, for the snapshots that can no longer be activated at
	// CreatedAt: release N+1 then re-issues, with the same policy, the
	// targets whose snapshot's renewal time has come by CreatedAt (the
	// window ends within their lease profile's renewBefore, or with a
	// renewSpread the host's renewal time before that has come; a Gateway
	// or Knowledge service bound to a re-issued Agent changes with it: it
	// lists the Agent's new publication), and keeps every other snapshot — the release a change
	// at CreatedAt would make, without the change. When no renewal time
	// has come, release N is left as it is (Result.Unchanged). It derives
	// like any release, so --check and promote verify it. Release N+1 is
	// compiled on release N as committed, as after a source change: N is
	// derived again only when nothing is due, to say whether it is up to
	// date (whether anything is due is read from release N's windows
	// first). Ignored with CheckOnly.
	Renew bool
	// Ignored, when set, reports whether Git ignores the file or
	// directory p of the policy tree (slash-separated) and does not track
	// it (gitfs.Ignored): such a file, or anything in such a directory,
	// is not a source, since a release is compiled from what is committed
	// and a clean clone does not have it. Result.Ignored lists the *.yaml
	// and *.yml files and the directories left out. Nil: none is.
	Ignored func(p string, isDir bool) bool
}

// PreviousRelease returns the recorded manifest bytes of release version of
// envTag, or an error wrapping bundle.ErrReleaseNotRecorded.
type PreviousRelease func(ctx context.Context, envTag string, version int64) ([]byte, error)

// IntroducedTree returns the policy tree of the commit that introduced the
// committed release file of envTag (Git: the oldest commit of the first-parent
// history of HEAD that holds the same bytes): the sources it was compiled
// from, when a later commit changed them without compiling. A tree whose
// release file is not the committed one is not used.
type IntroducedTree func(ctx context.Context, envTag string) (fs.FS, error)

// PreviousTree returns a policy tree whose releases/<envTag>.yaml is release
// version of envTag, or an error wrapping bundle.ErrReleaseNotRecorded.
type PreviousTree func(ctx context.Context, envTag string, version int64) (fs.FS, error)

// Target is one compiled runtime target.
type Target struct {
	Host, ServiceID, EnvTag, Audience           string
	SubjectKind, SubjectName                    string
	SnapshotID, PublicationID, PolicySnapshotID string // lowercase UUIDv8, deterministic
	ReleaseVersion, PolicyVersion               int64  // ReleaseVersion: the release that created this snapshot
	PolicyDigest, ContentDigest                 string
	PropertySetDigest, ArtifactDigest           string
	Changed                                     bool // changed since the base release
	Envelope                                    bundle.RuntimePolicy
	LeaseProfile                                string
	DeliveryLease                               bundle.LeaseWindow
	Values                                      []byte            // exact values.yml bytes; ArtifactDigest = sha256(Values)
	InputDigests                                map[string]string // input file path -> sha256 digest
	PropertySet                                 []byte            // RFC 8785 bytes of the flattened property map
	Namespace                                   []byte            // RFC 8785 bytes of the audience namespace (contentDigest input)
}

// Identity returns the target's runtime identity.
func (t *Target) Identity() bundle.Identity {
	return bundle.Identity{Host: t.Host, ServiceID: t.ServiceID, EnvTag: t.EnvTag}
}

// Result is the outcome of a compile.
type Result struct {
	Manifest *bundle.Manifest // the release manifest
	// ManifestBytes is the release as one release archive
	// (bundle.Archive): releases/<envTag>.yaml and its shards
	// releases/<envTag>/<host>.yaml, exact bytes. ForStreaming lets go of
	// them when they are the committed release's: ReleaseArchive reads
	// them again.
	ManifestBytes []byte
	// UpToDate: the committed manifest is exactly what the sources and the
	// trusted previous release derive (byte-identical). Stale explains
	// why not.
	UpToDate  bool
	Targets   []Target       // sorted by host, serviceId; with Options.ManifestOnly nil, or those Options.Keep accepts
	Workflows []WorkflowView // internal Workflow views (not delivered)
	// ProtectedRef is the Repository document's spec.protectedRef, "" when
	// it declares none. The promoter refuses a repository that declares
	// another ref than the one it is configured with.
	ProtectedRef string
	// Rollout is the Environment's rollout policy (activation mode, freeze
	// windows, health gate); it is recorded with the release, not
	// delivered.
	Rollout bundle.Rollout
	// Reissued lists, per target carried over unchanged whose snapshot's
	// activation window no longer contains this release's createdAt, why it
	// became a new snapshot of this release.
	Reissued []Reissue
	// Ignored lists the *.yaml and *.yml files and the directories
	// ("local/") of the policy tree that Options.Ignored left out, in
	// path order.
	Ignored []string

	stale error
	// workflowSpecs are the repository's Workflow documents by name, as
	// decoded (AddedWorkflowVersions).
	workflowSpecs map[string]*workflowSpec
	// unchanged: ManifestBytes are the committed release's, byte for byte
	// (see Unchanged).
	unchanged bool
	// again makes a fresh compilation of this result's release (set with
	// ManifestOnly, for EachTarget), from the sources read again.
	again func(context.Context) (*compilation, error)
	// want is what EachTarget checks each target against once
	// ForStreaming let go of the manifest's entries.
	want []wantTarget
	// committedAgain reads the committed release archive again, for a
	// result that is it byte for byte (UpToDate): ForStreaming then lets
	// go of ManifestBytes, and ReleaseArchive reads them again.
	committedAgain func() ([]byte, error)
	// promotion and activation are PromotionWindow and ActivationWindow,
	// and sources SourcesDigest, kept by ForStreaming.
	promotion, activation *[2]string
	sources               string
	// ownInputs is each host's own inputs (Options.CheckOnly only), to
	// name those that changed when the release is stale.
	ownInputs map[string][]bundle.Input
}

// SourcesDigest returns a digest of the policy sources the release was
// compiled from — its inputs, shared and per host — so that two releases
// compiled from the same sources have the same one: a renewal (compiled
// with Options.Renew) changes no source of the release it follows.
func (r *Result) SourcesDigest() string {
	if r.sources != "" {
		return r.sources
	}
	return sourcesDigest(r.Manifest)
}

func sourcesDigest(m *bundle.Manifest) string {
	h := sha256.New()
	for _, in := range m.Inputs {
		fmt.Fprintf(h, "i%d:%s%d:%s", len(in.Path), in.Path, len(in.Digest), in.Digest)
	}
	for _, hi := range m.HostInputs {
		fmt.Fprintf(h, "h%d:%s%d:%s", len(hi.Host), hi.Host, len(hi.Digest), hi.Digest)
	}
	return digest.FromSum([sha256.Size]byte(h.Sum(nil))).String()
}

// PromotionWindow returns when the release can be promoted: the latest
// validFrom and the earliest expiresAt of the snapshots it creates (the
// entries of its own releaseVersion), in the manifest's time form. A
// promotion outside it is refused, since those snapshots' pointers must
// move. Snapshots kept from earlier releases do not count: their pointers
// are already there. Both are "" when the release creates no snapshot.
func (r *Result) PromotionWindow() (from, until string) {
	if r.promotion != nil {
		return r.promotion[0], r.promotion[1]
	}
	return windowOf(r.Manifest, true)
}

// ActivationWindow returns when every target of the release can be moved
// to it — activated, or returned to by a rollback: the latest validFrom
// and the earliest expiresAt of every snapshot it maps a target to, those
// it creates and those it keeps from earlier releases, in the manifest's
// time form (the window the release store keeps per recorded release).
// After it, a move to the release is refused for a target whose snapshot's
// window ended; a release compiled at or after it re-issues that target,
// so a rollback from that release to this one is refused. Both are "" when
// the release has no targets.
func (r *Result) ActivationWindow() (from, until string) {
	if r.activation != nil {
		return r.activation[0], r.activation[1]
	}
	return windowOf(r.Manifest, false)
}

// windowOf returns the latest validFrom and earliest expiresAt of m's
// entries: only of those m's release creates when own is set.
func windowOf(m *bundle.Manifest, own bool) (from, until string) {
	for i := range m.Targets {
		e := &m.Targets[i]
		if own && e.ReleaseVersion != m.ReleaseVersion {
			continue
		}
		// The manifest's one time form (bundle.TimeFormat) orders as text.
		if from == "" || e.ValidFrom > from {
			from = e.ValidFrom
		}
		if until == "" || e.ExpiresAt < until {
			until = e.ExpiresAt
		}
	}
	return from, until
}

// wantTarget is what a re-derived target must reproduce of its entry.
type wantTarget struct {
	host, serviceID, snapshotID, artifactDigest string
	changed                                     bool
}

// wantOf returns what each of entries' targets must reproduce.
func wantOf(entries []bundle.TargetEntry) []wantTarget {
	want := make([]wantTarget, len(entries))
	for i := range entries {
		e := &entries[i]
		want[i] = wantTarget{host: e.Host, serviceID: e.ServiceID, snapshotID: e.SnapshotID, artifactDigest: e.ArtifactDigest, changed: e.Changed}
	}
	return want
}

// ForStreaming prepares a ManifestOnly result that is only streamed
// (EachTarget) and reported from here on, as a publication or a plan
// (NewPlan, PlanKeep, PlanTargets) does: it keeps the release header,
// releaseDigest, its promotion and activation windows, its sources' digest
// and, per target, what EachTarget checks the re-derived target against,
// and lets go of the rest of the manifest — subjects, inputs, workflows
// and every entry, which a large release holds by the hundred megabytes
// while its sources are read again — and, when the release is the
// committed one byte for byte, of its bytes, which ReleaseArchive reads
// again from the committed files. Afterwards Manifest.Targets is nil;
// TargetCount still counts the targets. A result with every target
// compiled is left as it is.
func (r *Result) ForStreaming() {
	if r.again == nil || r.want != nil {
		return
	}
	m := r.Manifest
	r.want = wantOf(m.Targets)
	from, until := windowOf(m, true)
	r.promotion = &[2]string{from, until}
	from, until = windowOf(m, false)
	r.activation = &[2]string{from, until}
	r.sources = sourcesDigest(m)
	r.Manifest = &bundle.Manifest{ReleaseHeader: m.ReleaseHeader, ReleaseDigest: m.ReleaseDigest}
	r.LetGoOfArchive()
}

// LetGoOfArchive lets go of ManifestBytes when the release is the
// committed one byte for byte and can be read again from the committed
// files, which ReleaseArchive then does; it reports whether it did. A
// caller that needs the archive only at the start and the end of a long
// task (a promotion, which publishes for minutes in between) then does not
// hold it — tens of megabytes at 100,000 targets — meanwhile.
func (r *Result) LetGoOfArchive() bool {
	if !r.UpToDate || r.committedAgain == nil {
		return false
	}
	r.ManifestBytes = nil
	return true
}

// Unchanged reports whether the release is the committed release byte for
// byte, so that there is nothing to write: an up-to-date release, or a
// next release that reproduces it.
func (r *Result) Unchanged() bool { return r.UpToDate || r.unchanged }

// ReleaseArchive returns the release as one release archive:
// ManifestBytes, or, once ForStreaming let go of them, the committed
// release read again, which must not have changed since it was compiled.
func (r *Result) ReleaseArchive() ([]byte, error) { return r.ArchiveAgain()() }

// ArchiveAgain returns a function that returns the release archive as
// ReleaseArchive does and refers to nothing else of r, so that r — a large
// release's sources and entries — can be collected before it is called: a
// promotion reads the archive to record the release only after it let go
// of its compile.
func (r *Result) ArchiveAgain() func() ([]byte, error) {
	if b := r.ManifestBytes; b != nil || r.committedAgain == nil {
		return func() ([]byte, error) { return b, nil }
	}
	return r.committedAgain
}

// TargetCount returns the number of targets of the release.
func (r *Result) TargetCount() int {
	if r.want != nil {
		return len(r.want)
	}
	return len(r.Manifest.Targets)
}

// eachArtifact calls fn with the host, serviceId and artifact digest of
// every target of the release, in manifest order: from the manifest's
// entries or, once ForStreaming let go of them, from what it kept. The
// first error of fn stops it and is returned.
func (r *Result) eachArtifact(fn func(host, serviceID, artifactDigest string) error) error {
	if r.want != nil {
		for i := range r.want {
			w := &r.want[i]
			if err := fn(w.host, w.serviceID, w.artifactDigest); err != nil {
				return err
			}
		}
		return nil
	}
	for i := range r.Manifest.Targets {
		e := &r.Manifest.Targets[i]
		if err := fn(e.Host, e.ServiceID, e.ArtifactDigest); err != nil {
			return err
		}
	}
	return nil
}

// EachTarget calls fn with every target of the release, in manifest order
// (host, serviceId), one call at a time; fn owns the target it is given.
// For a result compiled with Options.ManifestOnly the release is compiled
// again, host by host, from the sources read again (Compile let go of
// them; sources that changed since are an error), so that memory holds the
// hosts in flight and never every artifact; each target is then checked
// against the manifest entry it must reproduce (identity, snapshot,
// artifact digest), and a mismatch is an error (the compile would not be
// deterministic). The first error, of fn or of the compile, stops the
// stream and is returned.
func (r *Result) EachTarget(ctx context.Context, fn func(*Target) error) error {
	return r.EachTargetOf(ctx, nil, fn)
}

// EachTargetOf is EachTarget over the targets of the hosts keep accepts
// (nil: every host); with Options.ManifestOnly only those hosts are
// compiled again (a host's targets depend on its own documents alone).
func (r *Result) EachTargetOf(ctx context.Context, keep func(host string) bool, fn func(*Target) error) error {
	if r.again == nil { // compiled with every target
		for i := range r.Targets {
			if err := ctx.Err(); err != nil {
				return err
			}
			if keep != nil && !keep(r.Targets[i].Host) {
				continue
			}
			if err := fn(&r.Targets[i]); err != nil {
				return err
			}
		}
		return nil
	}
	want := r.want
	if want == nil {
		want = wantOf(r.Manifest.Targets)
	}
	if keep != nil {
		kept := make([]wantTarget, 0, len(want))
		for _, w := range want {
			if keep(w.host) {
				kept = append(kept, w)
			}
		}
		want = kept
	}
	n := 0
	c, err := r.again(ctx)
	if err != nil {
		return err
	}
	c.only = keep
	c.emit = func(t *Target) error {
		if n >= len(want) {
			return fmt.Errorf("compile %s: %w: target %s/%s is not in release %d", r.Manifest.EnvTag, ErrNotReproduced, t.Host, t.ServiceID, r.Manifest.ReleaseVersion)
		}
		e := &want[n]
		if t.Host != e.host || t.ServiceID != e.serviceID || t.SnapshotID != e.snapshotID || t.ArtifactDigest != e.artifactDigest {
			return fmt.Errorf("compile %s: %w: target %s/%s snapshot %s artifact %s, release %d lists %s/%s snapshot %s artifact %s",
				r.Manifest.EnvTag, ErrNotReproduced, t.Host, t.ServiceID, t.SnapshotID, t.ArtifactDigest,
				r.Manifest.ReleaseVersion, e.host, e.serviceID, e.snapshotID, e.artifactDigest)
		}
		t.Changed = e.changed // as the release states it (see finish)
		n++
		return fn(t)
	}
	if _, err := c.run(ctx); err != nil {
		return err
	}
	if n != len(want) {
		return fmt.Errorf("compile %s: %w: compiled %d targets, release %d lists %d", r.Manifest.EnvTag, ErrNotReproduced, n, r.Manifest.ReleaseVersion, len(want))
	}
	return nil
}

// Reissue explains why an unchanged target got a new snapshot.
type Reissue struct {
	Host, ServiceID string
	Reason          string
}

// ManifestPath returns the path of an environment's release manifest inside
// the policy repository.
func ManifestPath(envTag string) string { return ReleasesDir + "/" + envTag + ".yaml" }

const timeFormat = "2006-01-02T15:04:05Z"

// Compile compiles the policy repository in fsys for opts.EnvTag. It reads
// only fsys, through the policy tree reader (symbolic links and special
// files refused, every read bounded by policytree's default limits); it
// never writes (see Write).
//
// The committed release manifest is checked, never trusted: release N is
// re-derived from the sources, the trusted previous release N-1
// (opts.Previous) and the release parameters (envTag, N, createdAt); the
// result is UpToDate only when that derivation is byte-identical to the
// committed file. Otherwise the result is what `configpub compile` writes:
// release N+1 on base N when the sources changed (createdAt from
// opts.CreatedAt), else release N as derived (a hand-edited or
// non-canonical manifest is repaired), and Stale names the first
// difference.
func Compile(ctx context.Context, fsys fs.FS, opts Options) (*Result, error) {
	var in readNotes
	res, err := compile(ctx, fsys, opts, &in)
	if err != nil {
		if len(in.ignored) > 0 {
			// What the ignored files defined may be what is missing.
			err = fmt.Errorf("%w\n(%s)", err, IgnoredNote(in.ignored))
		}
		return nil, err
	}
	res.Ignored = in.ignored
	return res, nil
}

// readNotes is what a compile read that can explain its outcome.
type readNotes struct {
	ignored []string // the source files and directories Git ignores, left out
}

// maxIgnoredShown bounds the files IgnoredNote names.
const maxIgnoredShown = 10

// IgnoredNote says that the files Git ignores (Result.Ignored) were not
// compiled, naming them escaped (at most 10, and how many more).
func IgnoredNote(files []string) string {
	n := min(len(files), maxIgnoredShown)
	shown := make([]string, n)
	for i, f := range files[:n] {
		shown[i] = safetext.Terminal(f)
	}
	more := ""
	if len(files) > n {
		more = fmt.Sprintf(" and %d more", len(files)-n)
	}
	return fmt.Sprintf("ignored by Git: not compiled: a release is compiled from what is committed: %s%s", strings.Join(shown, ", "), more)
}

// compile is Compile; it notes in *in what can explain its outcome.
func compile(ctx context.Context, fsys fs.FS, opts Options, in *readNotes) (*Result, error) {
	if opts.EnvTag == "" {
		return nil, errors.New("compile: envTag is required")
	}
	if err := bundle.CheckEnvTag(opts.EnvTag); err != nil {
		return nil, fmt.Errorf("compile: %w", err)
	}
	fsys = policytree.New(fsys, policytree.Limits{})
	set, err := schemas.Default()
	if err != nil {
		return nil, fmt.Errorf("compile: schemas: %w", err)
	}
	ss, err := loadSources(ctx, fsys, set, opts.Ignored)
	if err != nil {
		return nil, err
	}
	in.ignored = ss.ignored
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	loaded, err := buildModel(ss)
	if err != nil {
		return nil, err
	}
	// A derivation consumes its model: each host's documents are let go
	// once the host is compiled (model.partition). The first derivation
	// takes the model just built; any other (the next release after the
	// committed one is verified, EachTarget) reads the sources again, which
	// must be the ones read first.
	sum := ss.digest
	load := func(ctx context.Context) (*model, error) {
		if m := loaded; m != nil {
			loaded = nil
			return m, nil
		}
		again, err := loadSources(ctx, policytree.New(fsys, policytree.Limits{}), set, opts.Ignored) // a read budget per pass
		if err != nil {
			return nil, err
		}
		if again.digest != sum {
			return nil, fmt.Errorf("compile %s: the policy repository changed while it was compiled; compile again", opts.EnvTag)
		}
		return buildModel(again)
	}
	committedFS := fsys
	if opts.Committed != nil {
		committedFS = policytree.New(opts.Committed, policytree.Limits{})
	}
	cr, err := loadCommitted(committedFS, opts.EnvTag)
	if err != nil {
		return nil, err
	}
	var archiveSize int
	if cr != nil {
		archiveSize = cr.size
	}
	newC := func(ctx context.Context, base *baseRelease, release int64, createdAt time.Time, reproduce bool) (*compilation, error) {
		m, err := load(ctx)
		if err != nil {
			return nil, err
		}
		c := &compilation{m: m, env: opts.EnvTag, set: set, createdAt: createdAt, base: base,
			next: release, reproduce: reproduce, manifestOnly: opts.ManifestOnly, keep: opts.Keep, archiveSize: archiveSize}
		if opts.CheckOnly {
			c.ownInputs = map[string][]bundle.Input{}
			if cr != nil && cr.check != nil {
				c.recordedInputs = cr.check.hosts
			}
		}
		return c, nil
	}
	// start runs one derivation; a ManifestOnly result keeps how to run it
	// again, for EachTarget.
	start := func(base *baseRelease, release int64, createdAt time.Time, reproduce bool) (*Result, error) {
		again := func(ctx context.Context) (*compilation, error) { return newC(ctx, base, release, createdAt, reproduce) }
		c, err := again(ctx)
		if err != nil {
			return nil, err
		}
		res, err := c.run(ctx)
		if err != nil {
			return nil, err
		}
		if opts.ManifestOnly {
			res.again = again
		}
		return res, nil
	}
	if cr == nil {
		res, err := start(nil, 1, opts.CreatedAt, false)
		if err != nil {
			return nil, err
		}
		res.stale = fmt.Errorf("%w: %s does not exist; run configpub compile", ErrStale, ManifestPath(opts.EnvTag))
		return res, nil
	}

	// A renewal (Renew) writes release N+1 on release N as committed,
	// whether or not N derives (as a compile after a source change does),
	// and release N is derived again only when nothing is due — to tell an
	// up-to-date release, left as it is, from an edited one, written again
	// as derived. Either way one derivation, not two (at 100,000 targets,
	// half the time, and release N-1 is read only to verify N). When
	// something is due, N+1 is what a compile after a source change writes
	// too, so the inputs N records are not compared first.
	nothingDue := false
	if opts.Renew && !opts.CheckOnly {
		base, err := cr.base()
		if err != nil {
			return nil, err
		}
		due, err := renewalDue(loaded, opts.EnvTag, base, opts.CreatedAt)
		if err != nil {
			return nil, err
		}
		if due {
			next, err := start(base, cr.header.ReleaseVersion+1, opts.CreatedAt, true)
			if err != nil {
				return nil, err
			}
			if next.Manifest.ReleaseVersion != cr.header.ReleaseVersion {
				return next, nil
			}
			// N+1 reproduced N: nothing changed since N.
		}
		// Nothing is due: N+1 would be release N unless the sources
		// changed. What follows is a compile of release N.
		nothingDue = true
	}

	// Re-derive the committed release N from the trusted release N-1 —
	// unless N is known not to derive and the next release is compiled
	// anyway: when an input the committed release records changed (its
	// root's shared inputs, a shard's inputsDigest), release N-1 is not
	// read at all and the model just built is the next release's. Asked
	// only whether N is up to date, N derives whatever changed: that names
	// the first differing target.
	var (
		prev    *baseRelease
		verr    error
		derived bool
	)
	if !opts.CheckOnly && cr.check != nil && loaded != nil { // loaded is nil once a renewal reproduced N
		err := cr.check.sharedInputs(loaded.src)
		if err == nil {
			err = checkInputs(loaded, opts.EnvTag, cr.check)
		}
		var changed *inputsChangedError
		switch {
		case errors.As(err, &changed):
			verr, derived = fmt.Errorf("%w: %s: %w", ErrStale, ManifestPath(opts.EnvTag), err), true
		case err != nil:
			return nil, err
		}
	}
	if verr == nil {
		prev, verr = previousRelease(ctx, opts, cr.header.ReleaseVersion)
	}
	derive := func() (*Result, error) {
		if prev == nil && cr.header.ReleaseVersion > 1 { // let go while the next release compiled
			var err error
			if prev, err = previousRelease(ctx, opts, cr.header.ReleaseVersion); err != nil {
				return nil, err
			}
		}
		at, _ := bundle.ParseTime(cr.header.CreatedAt) // loadCommitted checked it
		return start(prev, cr.header.ReleaseVersion, at, false)
	}
	if verr == nil {
		// While release N derives, the committed release is held by its
		// digest only, and read again if it turns out to differ.
		d, err := derive()
		switch {
		case err != nil:
			return nil, err
		case cr.matches(d.ManifestBytes):
			// The committed release is what derives, byte for byte: it is
			// not parsed at all (the derivation is its parse), and the
			// result holds it once.
			d.UpToDate = true
			if cr.check != nil { // sharded: read again shard by shard
				d.committedAgain = func() ([]byte, error) {
					again, same, err := cr.readAgain(policytree.New(committedFS, policytree.Limits{})) // a read budget of its own
					if err != nil {
						return nil, err
					}
					if !same {
						return nil, fmt.Errorf("compile %s: %s changed since it was compiled", opts.EnvTag, ManifestPath(opts.EnvTag))
					}
					return again.bytes, nil
				}
			}
			return d, nil
		default:
			committed, err := cr.manifest()
			if err != nil {
				return nil, err
			}
			derived = true
			switch {
			case committed.SingleFile:
				verr = fmt.Errorf("%w: %s is a single-file release manifest; configpub compile rewrites it as a root and one shard per host under %s/", ErrStale, ManifestPath(opts.EnvTag), bundle.ShardDir(opts.EnvTag))
			case len(cr.unlisted) > 0:
				verr = fmt.Errorf("%w: %s is not listed by %s; configpub compile removes it", ErrStale, cr.unlisted[0], ManifestPath(opts.EnvTag))
			default:
				verr = firstDifference(committed, d.Manifest, prev.manifest(), changedInputs(ctx, opts, committedFS, committed, d))
			}
			if opts.CheckOnly || nothingDue {
				// Asked only whether N is up to date; or a renewal with
				// nothing due, whose release would be N, which does not
				// derive: N is written as derived.
				d.stale = verr
				return d, nil
			}
		}
		// d is let go while the next release compiles: a large
		// environment does not hold two compiled releases at once.
	}

	// Not verified: what `configpub compile` writes instead, on the
	// committed release, whose target entries are read host by host as
	// each host compiles (unless it was parsed whole already).
	base, err := cr.base()
	if err != nil {
		return nil, err
	}
	committed := base.Manifest
	prev = nil // release N-1 is not the next release's base: read again if N is derived again
	next, err := start(base, committed.ReleaseVersion+1, opts.CreatedAt, true)
	if err != nil {
		return nil, err
	}
	res := next
	if next.Manifest.ReleaseVersion == committed.ReleaseVersion && derived {
		// The sources did not change since release N, yet N does not
		// derive: the manifest was edited. Write release N as derived.
		next = nil
		if res, err = derive(); err != nil {
			return nil, err
		}
	}
	res.unchanged = cr.matches(res.ManifestBytes)
	res.stale = verr
	return res, nil
}

// committedRelease is the release committed in the policy repository, as
// read: its root's release parameters and the SHA-256 of its bytes and of
// each of its files. A sharded release is parsed only when it is needed (a
// release that derives byte for byte never is), reading its files again
// one by one, and its bytes are held only when asked for again
// (Result.ReleaseArchive): a large release is tens of megabytes, read
// again rather than held while the sources compile.
type committedRelease struct {
	fsys fs.FS
	env  string

	header *bundle.ReleaseHeader
	// sum is the SHA-256 of the release archive (root, then every shard the
	// root lists, then a marker per unlisted shard, so that it never equals
	// a derived release), or of the root of a single-file manifest.
	sum [sha256.Size]byte
	// sums are the SHA-256 of the root and of each shard it lists, in its
	// order (nil for a single file): what a file read again must match.
	sums [][sha256.Size]byte
	// bytes is the single-file root, or the archive of a sharded release
	// read to be held (readAgain); nil otherwise.
	bytes []byte
	// size is the length of the archive of a sharded release (0 for a
	// single file, whose size says nothing of a sharded one's).
	size     int
	unlisted []string         // files in releases/<env>/ the root does not list
	m        *bundle.Manifest // parsed: at once for a single file, else on demand
	readMu   sync.Mutex       // one read at a time: fsys need not allow more
	// check is what a sharded release records of its inputs (nil for a
	// single file).
	check *inputCheck
}

// matches reports whether b is the committed release, byte for byte.
func (c *committedRelease) matches(b []byte) bool {
	if c.bytes != nil {
		return bytes.Equal(b, c.bytes)
	}
	return sha256.Sum256(b) == c.sum
}

// readAgain reads the committed release again from fsys, holding its
// bytes; same reports whether it is the release first read.
func (c *committedRelease) readAgain(fsys fs.FS) (again *committedRelease, same bool, err error) {
	if again, err = readCommitted(fsys, c.env, true); err != nil {
		return nil, false, err
	}
	return again, again != nil && again.m == nil && again.sum == c.sum, nil
}

// manifest parses the committed release (once); one that breaks its own
// invariants is stale. A sharded release is read again file by file as its
// shards are decoded, each file checked against the SHA-256 it had when
// first read: its files are never all held.
func (c *committedRelease) manifest() (*bundle.Manifest, error) {
	if c.m != nil {
		return c.m, nil
	}
	m, err := parseCommitted(c, bundle.ParseRelease)
	if err != nil {
		return nil, err
	}
	c.m = m
	return c.m, nil
}

// base returns the committed release as the base of the next: when it is
// not parsed already, a sharded release is read and checked whole as
// manifest does, but holds its target entries only while a host compiles,
// each host's shard read and decoded again at its turn.
func (c *committedRelease) base() (*baseRelease, error) {
	if c.m != nil {
		return fullBase(c.m), nil
	}
	o, err := parseCommitted(c, bundle.ParseOutline)
	if err != nil {
		return nil, err
	}
	return outlineBase(o, func(k int, host string) (bundle.ReleaseFile, error) {
		sp := bundle.ShardPath(c.env, host)
		b, err := c.read(sp, k+1)
		return bundle.ReleaseFile{Path: sp, Bytes: b}, err
	}), nil
}

// read reads file number k of the committed release (0: the root, then
// each shard it lists) again, one read at a time, refusing other bytes
// than were first read.
func (c *committedRelease) read(path string, k int) ([]byte, error) {
	c.readMu.Lock()
	defer c.readMu.Unlock()
	b, err := fs.ReadFile(c.fsys, path)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	b = LF(b) // as first read
	if k >= len(c.sums) || sha256.Sum256(b) != c.sums[k] {
		return nil, fmt.Errorf("compile %s: %s changed while it was compiled", c.env, ManifestPath(c.env))
	}
	return b, nil
}

// parseCommitted reads the committed sharded release again, file by file
// as parse decodes its shards, and parses it; one that breaks its own
// invariants is stale.
func parseCommitted[T any](c *committedRelease, parse func(bundle.ReleaseFile, func(int, bundle.ShardRef) (bundle.ReleaseFile, error)) (T, error)) (T, error) {
	var zero T
	p := ManifestPath(c.env)
	root, err := c.read(p, 0)
	if err != nil {
		return zero, err
	}
	var (
		mu      sync.Mutex
		readErr error
	)
	v, err := parse(bundle.ReleaseFile{Path: p, Bytes: root}, func(k int, ref bundle.ShardRef) (bundle.ReleaseFile, error) {
		sp := bundle.ShardPath(c.env, ref.Host)
		b, err := c.read(sp, k+1)
		if err != nil {
			mu.Lock()
			if readErr == nil {
				readErr = err
			}
			mu.Unlock()
		}
		return bundle.ReleaseFile{Path: sp, Bytes: b}, err
	})
	if readErr != nil {
		return zero, readErr
	}
	if err != nil {
		return zero, fmt.Errorf("%w: %w", ErrStale, err)
	}
	return v, nil
}

// baseRelease is the release a compilation carries its targets over from:
// its release-wide fields, inputs and subjects (Manifest, whose Targets
// may be nil) and, asked host by host, its target entries.
type baseRelease struct {
	*bundle.Manifest
	count int      // targets
	hosts []string // the hosts with targets, in manifest order
	// host returns the target entries of host, in manifest order (none
	// when the release has no targets on it).
	host func(host string) ([]bundle.TargetEntry, error)
}

// fullBase is a release parsed whole as a base (nil for none).
func fullBase(m *bundle.Manifest) *baseRelease {
	if m == nil {
		return nil
	}
	span := map[string][2]int{} // the targets are sorted by host
	var hosts []string
	for i := range m.Targets {
		h := m.Targets[i].Host
		s, ok := span[h]
		if !ok {
			s[0] = i
			hosts = append(hosts, h)
		}
		s[1] = i + 1
		span[h] = s
	}
	return &baseRelease{Manifest: m, count: len(m.Targets), hosts: hosts, host: func(host string) ([]bundle.TargetEntry, error) {
		s := span[host]
		return m.Targets[s[0]:s[1]:s[1]], nil
	}}
}

// manifest returns the base's release (nil for none).
func (b *baseRelease) manifest() *bundle.Manifest {
	if b == nil {
		return nil
	}
	return b.Manifest
}

// loadCommitted reads the committed release (nil when absent), holding
// only its digest and its root's release parameters (see readCommitted).
func loadCommitted(fsys fs.FS, env string) (*committedRelease, error) {
	return readCommitted(fsys, env, false)
}

// readCommitted reads the committed release (nil when absent): the root
// releases/<env>.yaml, whose release parameters are checked, and every
// shard it lists, one at a time, into the SHA-256 of their release archive
// and, when hold, into the archive itself; or a root of the single-file
// layout, held and parsed as it is. Files in releases/<env>/ that the root
// does not list make the release stale (compile removes them).
func readCommitted(fsys fs.FS, env string, hold bool) (*committedRelease, error) {
	p := ManifestPath(env)
	root, err := fs.ReadFile(fsys, p)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", p, err)
	}
	root = LF(root) // a checkout with CRLF line endings reads as committed
	c := &committedRelease{fsys: fsys, env: env}
	if bundle.IsSharded(root) {
		r, err := bundle.ParseRoot(p, root)
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrStale, err)
		}
		c.header = &r.ReleaseHeader
		c.check = &inputCheck{env: env, release: r.ReleaseVersion, shared: make(map[string]string, len(r.Inputs)), hosts: make(map[string]string, len(r.Shards))}
		for _, x := range r.Inputs {
			c.check.shared[x.Path] = x.Digest
		}
		// The archive is built (hold) or hashed one file at a time: each
		// shard is read and let go.
		var (
			b    []byte
			h    = sha256.New()
			head []byte
		)
		add := func(path string, data []byte) {
			head = bundle.AppendArchive(head[:0], path, nil)
			h.Write(head)
			h.Write(data)
			c.size += len(head) + len(data)
			if hold {
				b = bundle.AppendArchive(b, path, data)
			}
		}
		magic := bundle.NewArchive(0)
		h.Write(magic)
		c.size = len(magic)
		if hold {
			b = magic
		}
		add(p, root)
		c.sums = make([][sha256.Size]byte, 1, 1+len(r.Shards))
		c.sums[0] = sha256.Sum256(root)
		listed := map[string]bool{}
		for _, ref := range r.Shards {
			sp := bundle.ShardPath(env, ref.Host)
			sb, err := fs.ReadFile(fsys, sp)
			if errors.Is(err, fs.ErrNotExist) {
				return nil, fmt.Errorf("%w: %s lists shard %s, which does not exist", ErrStale, p, sp)
			}
			if err != nil {
				return nil, fmt.Errorf("read %s: %w", sp, err)
			}
			sb = LF(sb)
			listed[sp] = true
			c.check.hosts[ref.Host] = bundle.ShardInputsDigest(sb)
			add(sp, sb)
			c.sums = append(c.sums, sha256.Sum256(sb))
		}
		if c.unlisted, err = unlistedShards(fsys, env, listed); err != nil {
			return nil, err
		}
		for _, x := range c.unlisted {
			add(x, nil) // an empty entry: never a derived release
		}
		h.Sum(c.sum[:0])
		c.bytes = b
	} else {
		if c.m, err = bundle.ParseManifest(p, root); err != nil {
			return nil, fmt.Errorf("%w: %w", ErrStale, err)
		}
		c.header, c.bytes, c.sum = &c.m.ReleaseHeader, root, sha256.Sum256(root)
	}
	if c.header.EnvTag != env {
		return nil, &SourceError{File: p, Line: 1, Field: "envTag", Err: fmt.Errorf("envTag %q, want %q", c.header.EnvTag, env)}
	}
	return c, nil
}

// unlistedShards lists the entries of releases/<env>/ the root does not
// list, sorted.
func unlistedShards(fsys fs.FS, env string, listed map[string]bool) ([]string, error) {
	dir := bundle.ShardDir(env)
	ents, err := fs.ReadDir(fsys, dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", dir, err)
	}
	var out []string
	for _, e := range ents {
		if p := dir + "/" + e.Name(); !listed[p] {
			out = append(out, p)
		}
	}
	return out, nil
}

// previousRelease returns the trusted release N-1 for the committed release
// N (nil for release 1), or an ErrStale error saying why it is unavailable
// (not ErrStale when the history is incomplete: see Result.Stale).
// A sharded release N-1 is checked whole, then holds its archive rather
// than its target entries: each host's are decoded again from its shard
// at the host's turn.
func previousRelease(ctx context.Context, opts Options, n int64) (*baseRelease, error) {
	if n == 1 {
		return nil, nil
	}
	p := ManifestPath(opts.EnvTag)
	if opts.Previous == nil && opts.PreviousTree == nil {
		return nil, fmt.Errorf("%w: %s: release %d cannot be verified: no release history was given to read release %d from", ErrStale, p, n, n-1)
	}
	unavailable := func(err error) error {
		if errors.Is(err, bundle.ErrHistoryIncomplete) {
			// Not stale: whether it is cannot be told here.
			return fmt.Errorf("%s: release %d cannot be verified against release %d: %w", p, n, n-1, err)
		}
		return fmt.Errorf("%w: %s: release %d cannot be verified against release %d: %w", ErrStale, p, n, n-1, err)
	}
	name := fmt.Sprintf("release %d of %s", n-1, opts.EnvTag)
	recorded := func(err error) error {
		return fmt.Errorf("%w: %s: recorded release %d: %w", ErrStale, p, n-1, withoutStale(err))
	}
	var prev *baseRelease
	if opts.PreviousTree != nil {
		tree, err := opts.PreviousTree(ctx, opts.EnvTag, n-1)
		if err != nil {
			return nil, unavailable(err)
		}
		cr, err := loadCommitted(policytree.New(tree, policytree.Limits{}), opts.EnvTag)
		if err == nil && cr == nil {
			err = fmt.Errorf("%s does not exist there: %w", p, bundle.ErrReleaseNotRecorded)
		}
		if err == nil {
			prev, err = cr.base()
		}
		if err != nil {
			return nil, recorded(err)
		}
	} else if b, err := opts.Previous(ctx, opts.EnvTag, n-1); err != nil {
		return nil, unavailable(err)
	} else if bundle.IsArchive(b) {
		files, err := bundle.SplitArchive(b)
		if err != nil {
			return nil, recorded(fmt.Errorf("parse release manifest %s: %w", name, err))
		}
		o, err := bundle.ParseOutlineFiles(files)
		if err != nil {
			return nil, recorded(err)
		}
		prev = outlineBase(o, func(k int, _ string) (bundle.ReleaseFile, error) { return files[k+1], nil })
	} else {
		m, err := bundle.ParseManifest(name, b)
		if err != nil {
			return nil, recorded(err)
		}
		prev = fullBase(m)
	}
	if prev.EnvTag != opts.EnvTag || prev.ReleaseVersion != n-1 {
		return nil, fmt.Errorf("%w: %s: the recorded release asked for as %s/%d is %s/%d", ErrStale, p, opts.EnvTag, n-1, prev.EnvTag, prev.ReleaseVersion)
	}
	return prev, nil
}

// renewalDue reports whether a release created at createdAt on base
// re-issues any of base's snapshots for its activation window: whether
// the window of one of them ends, or its renewal time comes, by createdAt
// under its lease profile in model m (outsideWindow, as compileTarget
// decides for a target whose sources did not change). A Gateway or
// Knowledge target changes with a bound Agent's publication only when
// that Agent is itself due. A lease profile m does not know is a change:
// the compile says what it is. It reads base host by host and stops at
// the first snapshot due.
func renewalDue(m *model, env string, base *baseRelease, createdAt time.Time) (bool, error) {
	if createdAt.IsZero() {
		return false, nil
	}
	for _, h := range base.hosts {
		es, err := base.host(h)
		if err != nil {
			return false, err
		}
		var r renewal
		for i := range es {
			p, ok := m.repo.spec.LeaseProfiles[es[i].LeaseProfile]
			if !ok {
				return true, nil
			}
			if i == 0 || es[i].LeaseProfile != es[i-1].LeaseProfile {
				r = renewalOf(p, env, h)
			}
			if outsideWindow(&es[i], createdAt, r) != "" {
				return true, nil
			}
		}
	}
	return false, nil
}

// withoutStale returns what err (from reading a release) says without the
// ErrStale it may wrap: a release before the committed one is not stale,
// it is unusable, which the caller says.
func withoutStale(err error) error {
	if j, ok := err.(interface{ Unwrap() []error }); ok && errors.Is(err, ErrStale) {
		for _, e := range j.Unwrap() {
			if e != ErrStale {
				return e
			}
		}
	}
	return err
}

// outlineBase is a release read as an outline as a base: each host's
// target entries are decoded again from its shard, which file returns (k:
// its index in the root's list), at the host's turn.
func outlineBase(o *bundle.Outline, file func(k int, host string) (bundle.ReleaseFile, error)) *baseRelease {
	shard := make(map[string]int, len(o.Shards))
	hosts := make([]string, len(o.Shards))
	for k, ref := range o.Shards {
		shard[ref.Host], hosts[k] = k, ref.Host
	}
	return &baseRelease{Manifest: o.Manifest, count: o.TargetCount(), hosts: hosts, host: func(host string) ([]bundle.TargetEntry, error) {
		k, ok := shard[host]
		if !ok {
			return nil, nil
		}
		f, err := file(k, host)
		if err != nil {
			return nil, err
		}
		es, err := o.Entries(k, f)
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrStale, err)
		}
		return es, nil
	}}
}

// compilation is the state of one derivation of one release.
type compilation struct {
	m         *model
	env       string
	set       *schemas.Set
	createdAt time.Time
	envDoc    *entry[environmentSpec]

	// base is the release the targets are carried over from (nil: none);
	// next the release being compiled. reproduce: when nothing changed
	// against base, the result is base itself (how `compile` leaves an
	// up-to-date release alone).
	base      *baseRelease
	next      int64
	reproduce bool

	baseSubj map[[2]string]*bundle.Subject // base subjects by kind, name

	// manifestOnly: drop each target's bodies once digested (see
	// Options.ManifestOnly).
	manifestOnly bool
	// keep, with manifestOnly, selects the targets whose bodies outlive
	// their host (Options.Keep); held holds them by host index until
	// finish.
	keep func(*bundle.TargetEntry) bool
	held [][]heldTarget
	// archiveSize is the size of the committed release archive (0: none):
	// room for the release's own archive, allocated once.
	archiveSize int
	// ownInputs, kept when set (a check, whose stale release names the
	// inputs that changed), is each host's own inputs as placed — of the
	// hosts whose inputsDigest is not the one recordedInputs (the
	// committed release's, by host; nil: unknown) states.
	ownInputs      map[string][]bundle.Input
	recordedInputs map[string]string

	// only, when set, selects the hosts compiled (with emit: the others
	// are skipped and emit nothing).
	only func(host string) bool
	// emit, when set, receives the targets host by host in manifest
	// order (Result.EachTarget); run then stops before finish.
	emit     func(*Target) error
	emitMu   sync.Mutex
	emitTurn *sync.Cond // signalled when emitted or emitErr changes
	emitted  int        // hosts emitted so far
	emitErr  error      // the first failure: waiting hosts give up

	proj  map[string]*projector
	hosts []hostGroup // the hosts, in order, with their targets
	parts []*model    // each host's part of the model (model.partition), until the host is compiled
	// entries holds each host's target entries (by host index, each slot
	// written by its host's worker only) from when the host is compiled
	// until finish joins them.
	entries  [][]bundle.TargetEntry
	val      *validator
	mu       sync.Mutex         // guards the fields below, filled host by host
	agents   map[string]*policy // digests only (no trees)
	subjVer  map[[2]string]*bundle.Subject
	inputs   map[string]readInput // every input file of the targets, by path
	reissued []Reissue
	windows  map[string]newWindow // by lease profile name
	rollout  bundle.Rollout
}

func (c *compilation) run(ctx context.Context) (*Result, error) {
	m := c.m
	if m.owner != nil { // partitioned: a run let go of its documents
		return nil, fmt.Errorf("compile %s: internal error: a model compiles once", c.env)
	}
	env := m.envs[c.env]
	if env == nil {
		return nil, unknownEnvironment(c.env, sortedKeys(m.envs))
	}
	c.envDoc = env
	rollout := bundle.Rollout{Activation: env.spec.Activation, FreezeWindows: env.spec.FreezeWindows, HealthGate: env.spec.HealthGate}
	if err := rollout.Validate(); err != nil {
		return nil, env.src.errorf([]string{"spec"}, "%v", err)
	}
	c.rollout = rollout
	for _, aud := range sortedKeys(env.spec.Settings) {
		if err := checkSettingKeys(env.src, []string{"spec", "settings", aud}, env.spec.Settings[aud], true); err != nil {
			return nil, err
		}
	}
	workflows, ledger, err := m.checkWorkflows(c.base.manifest(), c.next)
	if err != nil {
		return nil, err
	}
	ts, err := c.selectTargets()
	if err != nil {
		return nil, err
	}
	if len(ts) == 0 {
		// An empty release could never be promoted (a release is the
		// whole target mapping of its environment and needs a target),
		// yet, committed, it would be the base of every later release.
		return nil, noTargets(c.env, env.src.File)
	}
	profiles := leaseProfiles(ts) // before the derivation lets the targets go
	c.proj = map[string]*projector{}
	for _, aud := range []string{bundle.AudienceAgent, bundle.AudienceGateway, bundle.AudienceKnowledge} {
		if c.proj[aud], err = newProjector(aud); err != nil {
			return nil, err
		}
	}
	if c.val, err = newValidator(c.set, c.proj); err != nil {
		return nil, err
	}
	if c.base != nil {
		c.baseSubj = make(map[[2]string]*bundle.Subject, len(c.base.Subjects))
		for i := range c.base.Subjects {
			x := &c.base.Subjects[i]
			c.baseSubj[[2]string{x.Kind, x.Name}] = x
		}
	}
	c.agents, c.subjVer = map[string]*policy{}, map[[2]string]*bundle.Subject{}
	c.inputs = map[string]readInput{}

	var out []Target // nil with ManifestOnly: the entries are the result
	if !c.manifestOnly {
		out = make([]Target, len(ts))
	}
	changed := make([]bool, len(ts))
	// Host by host, on a bounded pool of workers: a host's policy trees,
	// projections and (with ManifestOnly) rendered artifacts are released
	// when the host is done, so memory holds the hosts in flight, not the
	// whole environment.
	hosts := c.hostGroups(ts)
	c.hosts = hosts
	c.parts = m.partition(hosts)
	c.entries = make([][]bundle.TargetEntry, len(hosts))
	if c.keep != nil && out == nil && c.emit == nil {
		c.held = make([][]heldTarget, len(hosts))
	}
	if c.emit != nil {
		c.emitTurn = sync.NewCond(&c.emitMu)
	}
	err = parallel.Do(len(hosts), func(i int) error {
		err := ctx.Err()
		if err == nil {
			err = c.compileHost(i, hosts[i], ts, out, changed)
		}
		if err != nil && c.emit != nil {
			c.stopEmitting(err)
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	if c.emit != nil {
		return nil, nil
	}
	views, err := m.workflowViews(c.agents, m.repo.spec.CompatibilityGeneration)
	if err != nil {
		return nil, err
	}
	return c.finish(profiles, out, c.gatherEntries(len(ts)), changed, workflows, ledger, views)
}

// gatherEntries joins the hosts' target entries in manifest order, letting
// go of each host's as it is copied.
func (c *compilation) gatherEntries(n int) []bundle.TargetEntry {
	entries := make([]bundle.TargetEntry, n)
	for hi, g := range c.hosts {
		for k, i := range g.idx {
			entries[i] = c.entries[hi][k]
		}
		c.entries[hi] = nil
	}
	return entries
}

// compileHost compiles the targets of host number hi: its subjects, then its
// Agent targets, then its Gateway and Knowledge targets (whose projections
// list the accepted publications of the host's Agents). Each target writes
// only its own slots of out (nil with ManifestOnly) and changed, and its
// target entries (c.entries[hi], in g.idx order); its slots of ts are
// let go once the host is compiled. With emit set, the host's targets are
// kept until it is the host's turn to hand them over (see emitHost).
func (c *compilation) compileHost(hi int, g hostGroup, ts []*envTarget, out []Target, changed []bool) error {
	// The host's part of the model: its documents are freed with the
	// host's policies, below.
	hm := c.parts[hi]
	c.parts[hi] = nil
	if c.only != nil && c.emit != nil && !c.only(g.host) {
		return c.emitHost(hi, nil) // its turn passes
	}
	if _, err := c.resolveHost(hm, g, ts); err != nil {
		return err
	}
	var base map[string]*bundle.TargetEntry // the host's targets in the base release, by serviceId
	if c.base != nil {
		es, err := c.base.host(g.host)
		if err != nil {
			return err
		}
		base = make(map[string]*bundle.TargetEntry, len(es))
		for k := range es {
			base[es[k].ServiceID] = &es[k]
		}
	}
	var accepted map[string][]bundle.Publication
	inputs := files{}
	var scratch Target
	var kept []Target // with emit: the host's targets, in g.idx order
	if c.emit != nil {
		kept = make([]Target, len(g.idx))
	}
	entries := make([]bundle.TargetEntry, len(g.idx))
	var bufs *renderBufs // when every target is rendered into scratch
	if out == nil && kept == nil {
		bufs = &renderBufs{}
	}
	var held []heldTarget // with c.held: the targets c.keep accepts
	for pass := 0; pass < 2; pass++ {
		if pass == 1 {
			accepted = acceptedPublications(ts, g.idx, entries)
		}
		for k, i := range g.idx {
			t := ts[i]
			if (t.e.spec.Audience == bundle.AudienceAgent) != (pass == 0) {
				continue
			}
			o := &scratch
			switch {
			case out != nil:
				o = &out[i]
			case kept != nil:
				o = &kept[k]
			}
			if err := c.compileTarget(t, base[t.e.spec.ServiceID], accepted, o, &entries[k], bufs); err != nil {
				return err
			}
			if c.held != nil && c.keep(&entries[k]) {
				h := heldTarget{i: i, t: scratch}
				// The bytes are bufs', reused by the next target.
				h.t.Values, h.t.PropertySet, h.t.Namespace = bytes.Clone(h.t.Values), bytes.Clone(h.t.PropertySet), bytes.Clone(h.t.Namespace)
				held = append(held, h)
			}
			inputs.merge(o.InputDigests)
			changed[i] = o.Changed
			scratch = Target{}
		}
	}
	for _, i := range g.idx {
		// The target is compiled: what finish reads of it is in its entry.
		ts[i] = nil
	}
	if c.emit != nil {
		if err := c.emitHost(hi, kept); err != nil {
			return err
		}
		return nil // finish, which reads what follows, does not run
	}
	c.entries[hi] = entries
	if c.held != nil {
		c.held[hi] = held
	}
	return c.readInputs(hi, inputs)
}

// checkInputs checks the files the targets of environment env read in
// model m against the committed release's record (check), host by host in
// order, before anything derives: it resolves every host's subjects, but
// renders nothing, and leaves m as it was (each host resolves on a view of
// its own). A model that does not select its targets, and a host whose
// subjects do not resolve, are left to the derivation, which reports them.
func checkInputs(m *model, env string, check *inputCheck) error {
	c := &compilation{m: m, env: env, envDoc: m.envs[env]}
	if c.envDoc == nil {
		return nil
	}
	ts, err := c.selectTargets()
	if err != nil {
		return nil
	}
	hosts := c.hostGroups(ts)
	errs := make([]error, len(hosts))
	err = parallel.Do(len(hosts), func(i int) error {
		g := hosts[i]
		if len(g.idx) == 0 {
			return nil // no targets: nothing read (inputCheck.host)
		}
		_, subjects, err := resolveSubjects(m.view(), g, ts)
		if err != nil {
			return nil
		}
		in := files{}
		for _, t := range g.idx {
			sp := &ts[t].e.spec
			p := subjects[[2]string{sp.Subject.Kind, sp.Subject.Name}]
			if p == nil {
				return nil // unresolved: the derivation reports it
			}
			c.addInputs(in, ts[t], p)
		}
		errs[i] = check.host(g.host, in)
		return nil
	})
	if err != nil {
		return err
	}
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// emitHost waits for host hi's turn (every host before it handed over),
// then hands its targets to c.emit one by one, in order. Hosts are compiled
// on several workers but emitted in manifest order; a worker waits here
// at most for the hosts in flight before its own.
func (c *compilation) emitHost(hi int, ts []Target) error {
	c.emitMu.Lock()
	defer c.emitMu.Unlock()
	for c.emitted != hi && c.emitErr == nil {
		c.emitTurn.Wait()
	}
	if c.emitErr != nil {
		return c.emitErr
	}
	for k := range ts {
		if err := c.emit(&ts[k]); err != nil {
			c.emitErr = err
			c.emitTurn.Broadcast()
			return err
		}
	}
	c.emitted++
	c.emitTurn.Broadcast()
	return nil
}

// stopEmitting records the first failure and wakes the hosts waiting for
// their turn, which then give up.
func (c *compilation) stopEmitting(err error) {
	c.emitMu.Lock()
	if c.emitErr == nil {
		c.emitErr = err
	}
	c.emitTurn.Broadcast()
	c.emitMu.Unlock()
}

// acceptedPublications lists, per Agent, the {publicationId, policyDigest}
// pairs of its targets (those of ts at idx, whose entries are in idx
// order) in this release and the ones they replaced.
func acceptedPublications(ts []*envTarget, idx []int, entries []bundle.TargetEntry) map[string][]bundle.Publication {
	out := map[string][]bundle.Publication{}
	seen := map[string]bool{}
	for k, i := range idx {
		t := ts[i]
		if t.e.spec.Audience != bundle.AudienceAgent {
			continue
		}
		n := t.e.spec.Subject.Name
		e := &entries[k]
		for _, p := range []*bundle.Publication{{PublicationID: e.PublicationID, PolicyDigest: e.PolicyDigest}, e.Previous} {
			if p == nil || seen[n+"\x00"+p.PublicationID] {
				continue
			}
			seen[n+"\x00"+p.PublicationID] = true
			out[n] = append(out[n], *p)
		}
	}
	for n := range out {
		sort.Slice(out[n], func(i, j int) bool { return out[n][i].PublicationID < out[n][j].PublicationID })
	}
	return out
}

func formatTime(t time.Time) string { return t.UTC().Format(timeFormat) }

func itoa64(i int64) string { return strconv.FormatInt(i, 10) }

func (c *compilation) finish(profiles []bundle.LeaseProfile, out []Target, entries []bundle.TargetEntry, changed []bool, workflows []bundle.WorkflowVersion, ledger []bundle.LedgerEntry, views []WorkflowView) (*Result, error) {
	m := c.m
	in, hostIn, all, err := c.placeInputs()
	if err != nil {
		return nil, err
	}
	// What the hosts gathered is placed: let go of it before the release
	// is rendered (a large environment's archive is tens of megabytes).
	c.inputs, c.agents = nil, nil
	anyChanged := false
	for _, ch := range changed {
		anyChanged = anyChanged || ch
	}
	subjects := c.placeSubjects(entries)
	c.subjVer = nil
	for i := range workflows {
		if w := m.workflows[workflows[i].Name]; w != nil {
			workflows[i].Host = w.spec.Host
		}
	}
	spec := &m.repo.spec
	sort.Slice(c.reissued, func(i, j int) bool {
		a, b := c.reissued[i], c.reissued[j]
		return a.Host < b.Host || a.Host == b.Host && a.ServiceID < b.ServiceID
	})
	res := &Result{Targets: out, Workflows: views, Reissued: c.reissued, ProtectedRef: m.repo.spec.ProtectedRef, Rollout: c.rollout,
		workflowSpecs: make(map[string]*workflowSpec, len(m.workflows)), ownInputs: c.ownInputs}
	for name, w := range m.workflows {
		spec := w.spec // a copy: the result does not hold the documents' sources
		res.workflowSpecs[name] = &spec
	}
	var man *bundle.Manifest
	if c.reproduce && c.base != nil && !anyChanged && len(entries) == c.base.count && equalSlices(c.base.LeaseProfiles, profiles) &&
		c.base.CompatibilityGeneration == spec.CompatibilityGeneration && c.base.RevocationEpoch == spec.RevocationEpoch &&
		c.sameInputs(in, hostIn, all) && equalSlices(unplaced(c.base.Subjects), unplaced(subjects)) &&
		equalSlices(unplacedWorkflows(c.base.Workflows), unplacedWorkflows(workflows)) && equalSlices(c.base.WorkflowLedger, ledger) {
		// Nothing changed: reproduce the committed release (in the
		// sharded layout, also when it was committed as a single file).
		cp := *c.base.Manifest
		cp.Targets = entries
		cp.Inputs, cp.HostInputs, cp.Subjects, cp.Workflows = in, hostIn, subjects, workflows
		man = &cp
	} else {
		if c.createdAt.IsZero() {
			return nil, fmt.Errorf("compile %s: release %d: %w", c.env, c.next, ErrCreatedAtRequired)
		}
		var baseVer int64
		if c.base != nil {
			baseVer = c.base.ReleaseVersion
		}
		for i := range entries {
			entries[i].Changed = changed[i]
		}
		man = &bundle.Manifest{
			ReleaseHeader: bundle.ReleaseHeader{
				APIVersion: bundle.ManifestAPIVersion, Kind: bundle.ManifestKind, EnvTag: c.env,
				ReleaseVersion: c.next, BaseReleaseVersion: baseVer, CreatedAt: formatTime(c.createdAt),
				SourceEventSequence: c.next, CompatibilityGeneration: spec.CompatibilityGeneration,
				RevocationEpoch: spec.RevocationEpoch, SchemaVersion: bundle.SchemaVersion, Renderer: render.Profile,
			},
			Inputs: in, HostInputs: hostIn, LeaseProfiles: profiles, Subjects: subjects, Workflows: workflows, WorkflowLedger: ledger, Targets: entries,
		}
	}
	for i := range out {
		out[i].Changed = entries[i].Changed
	}
	if c.held != nil {
		res.Targets = c.heldTargets(entries)
	}
	b, err := man.MarshalSize(c.archiveSize)
	if err != nil {
		return nil, err
	}
	res.Manifest, res.ManifestBytes = man, b
	return res, nil
}

// heldTarget is a target Options.Keep accepted, with its index in the
// release's targets.
type heldTarget struct {
	i int
	t Target
}

// heldTargets returns the targets the hosts held, in manifest order, with
// Changed as entries (the release's final entries) state it, and lets go
// of them.
func (c *compilation) heldTargets(entries []bundle.TargetEntry) []Target {
	var all []heldTarget
	for _, h := range c.held {
		all = append(all, h...)
	}
	c.held = nil
	slices.SortFunc(all, func(a, b heldTarget) int { return cmp.Compare(a.i, b.i) })
	out := make([]Target, len(all))
	for k := range all {
		out[k] = all[k].t
		out[k].Changed = entries[all[k].i].Changed
	}
	return out
}

// readInput is what a compilation records of one input file as its hosts
// compile: the file's SHA-256 and the host whose targets read it (an index
// into the compilation's hosts, or sharedInput).
type readInput struct {
	sum  [sha256.Size]byte
	host int32
}

// sharedInput is the host of an input read by several hosts' targets (and
// of the repository and environment documents): listed in the root.
const sharedInput = -1

// sumOf returns the SHA-256 a "sha256:" digest names.
func sumOf(d string) ([sha256.Size]byte, error) {
	var sum [sha256.Size]byte
	if !digest.Valid(d) {
		return sum, fmt.Errorf("input digest %q: %w", d, digest.ErrInvalid)
	}
	_, err := hex.Decode(sum[:], []byte(d[len(digest.Prefix):]))
	return sum, err
}

// readInputs records the inputs of host hi's targets.
func (c *compilation) readInputs(hi int, inputs files) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	for p, d := range inputs {
		r, ok := c.inputs[p]
		switch {
		case !ok:
			sum, err := sumOf(d)
			if err != nil {
				return fmt.Errorf("compile %s: %s: %w", c.env, p, err)
			}
			c.inputs[p] = readInput{sum: sum, host: int32(hi)}
		case r.host != int32(hi) && r.host != sharedInput:
			r.host = sharedInput
			c.inputs[p] = r
		}
	}
	return nil
}

// placeInputs splits the release's inputs: those only one host's targets
// read are digested per host (HostInputs); the others, and always the
// repository and environment documents, are listed in the root. all is
// every input, sorted by path, for a base release of the single-file
// layout (else nil). The inputs are placed host by host: a large
// environment does not hold every input's digest text at once.
func (c *compilation) placeInputs() (root []bundle.Input, hosts []bundle.HostInputs, all []bundle.Input, err error) {
	m := c.m
	read := c.inputs // the compilation's own map: it is finished
	for _, s := range []*source{m.repo.src, c.envDoc.src} {
		sum, err := sumOf(s.Digest)
		if err != nil {
			return nil, nil, nil, fmt.Errorf("compile %s: %s: %w", c.env, s.File, err)
		}
		read[s.File] = readInput{sum: sum, host: sharedInput}
	}
	type placed struct {
		path string
		host int32
	}
	ps := make([]placed, 0, len(read))
	for p, r := range read {
		ps = append(ps, placed{p, r.host})
	}
	slices.SortFunc(ps, func(a, b placed) int {
		if a.host != b.host {
			return cmp.Compare(a.host, b.host)
		}
		return strings.Compare(a.path, b.path)
	})
	input := func(p placed) bundle.Input {
		return bundle.Input{Path: p.path, Digest: digest.FromSum(read[p.path].sum).String()}
	}
	root = []bundle.Input{}
	for i := 0; i < len(ps); {
		j := i + 1
		for j < len(ps) && ps[j].host == ps[i].host {
			j++
		}
		in := make([]bundle.Input, 0, j-i)
		for _, p := range ps[i:j] {
			in = append(in, input(p))
		}
		if ps[i].host == sharedInput {
			root = in
		} else {
			h := c.hosts[ps[i].host].host
			d, err := bundle.InputsDigest(in)
			if err != nil {
				return nil, nil, nil, fmt.Errorf("compile %s: inputs of %s: %w", c.env, h, err)
			}
			hosts = append(hosts, bundle.HostInputs{Host: h, Digest: d})
			if c.ownInputs != nil && (c.recordedInputs == nil || c.recordedInputs[h] != d) {
				c.ownInputs[h] = in
			}
		}
		i = j
	}
	if c.base != nil && c.base.SingleFile {
		slices.SortFunc(ps, func(a, b placed) int { return strings.Compare(a.path, b.path) })
		all = make([]bundle.Input, len(ps))
		for i, p := range ps {
			all[i] = input(p)
		}
	}
	return root, hosts, all, nil
}

// sameInputs compares the inputs with the base release's, in its layout.
func (c *compilation) sameInputs(root []bundle.Input, hosts []bundle.HostInputs, all []bundle.Input) bool {
	if c.base.SingleFile {
		return equalSlices(c.base.Inputs, all)
	}
	return equalSlices(c.base.Inputs, root) && equalSlices(c.base.HostInputs, hosts)
}

// placeSubjects lists the subjects, sorted, each placed on the one host
// whose targets all serve it (else in the root).
func (c *compilation) placeSubjects(entries []bundle.TargetEntry) []bundle.Subject {
	host := map[[2]string]string{}
	for i := range entries {
		e := &entries[i]
		k := [2]string{e.SubjectKind, e.SubjectName}
		if h, ok := host[k]; !ok {
			host[k] = e.Host
		} else if h != e.Host {
			host[k] = ""
		}
	}
	subjects := make([]bundle.Subject, 0, len(c.subjVer))
	for k, s := range c.subjVer {
		x := *s
		x.Host = host[k]
		subjects = append(subjects, x)
	}
	sort.Slice(subjects, func(i, j int) bool {
		if subjects[i].Kind != subjects[j].Kind {
			return subjects[i].Kind < subjects[j].Kind
		}
		return subjects[i].Name < subjects[j].Name
	})
	return subjects
}

// unplaced returns the subjects without their shard placement.
func unplaced(in []bundle.Subject) []bundle.Subject {
	out := make([]bundle.Subject, len(in))
	for i, s := range in {
		s.Host = ""
		out[i] = s
	}
	return out
}

// unplacedWorkflows returns the workflow versions without their host.
func unplacedWorkflows(in []bundle.WorkflowVersion) []bundle.WorkflowVersion {
	out := make([]bundle.WorkflowVersion, len(in))
	for i, w := range in {
		w.Host = ""
		out[i] = w
	}
	return out
}

// leaseProfiles lists the lease profiles the targets name, sorted.
func leaseProfiles(ts []*envTarget) []bundle.LeaseProfile {
	byName := map[string]bundle.LeaseProfile{}
	for _, t := range ts {
		name := t.e.spec.LeaseProfile
		if _, ok := byName[name]; ok {
			continue
		}
		byName[name] = bundle.LeaseProfile{Name: name, Digest: t.pdigest, ValidFor: t.profile.ValidFor, RefreshAfter: t.profile.RefreshAfter,
			Delivery: bundle.Lease{RefreshAfter: t.profile.Delivery.RefreshAfter, ExpiresAfter: t.profile.Delivery.ExpiresAfter}}
	}
	out := make([]bundle.LeaseProfile, 0, len(byName))
	for _, n := range sortedKeys(byName) {
		out = append(out, byName[n])
	}
	return out
}

func equalSlices[T comparable](a, b []T) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// unknownEnvironment names the environments the repository does define.
// noTargets is the error for an environment with no Target document.
func noTargets(env, envFile string) error {
	return fmt.Errorf("%w: environment %q (%s) has no Target document with envTag: %s: a release needs at least one target, "+
		"so nothing was written; add a Target, or, to stop serving the environment, leave its last release in place and "+
		"see \"Removing an environment\" in docs/operations.md", ErrInvalidSource, env, envFile, env)
}

func unknownEnvironment(env string, known []string) error {
	if len(known) == 0 {
		return fmt.Errorf("%w: no environment %q: the repository has no Environment document (add environments/%s.yaml)", ErrInvalidSource, env, env)
	}
	return fmt.Errorf("%w: no environment %q: the repository's Environment documents are %s", ErrInvalidSource, env, strings.Join(known, ", "))
}
