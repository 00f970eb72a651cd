package registry

import (
	"bytes"
	"context"
	"crypto"
	"errors"
	"fmt"
	"io"
	"iter"
	"sync"

	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"golang.org/x/sync/errgroup"
	"oras.land/oras-go/v2/errdef"
	orasreg "oras.land/oras-go/v2/registry"
)

// PublishRequest is one publication: target artifacts and, optionally,
// the release artifact, all signed with one key.
type PublishRequest struct {
	// Prefix is "registry[:port][/path]", e.g. "127.0.0.1:5000/configpub".
	Prefix string
	// Artifacts are the target snapshots to publish.
	Artifacts []Artifact
	// Release is the release artifact; nil publishes targets only.
	Release *Release
	// ReleaseFrom, instead of Release, builds the release artifact when it
	// is pushed, once every target is complete: a large release's document
	// (tens of megabytes) is not held while the targets stream.
	ReleaseFrom func() (*Release, error)
	// Signer signs every manifest; an ECDSA P-256 key such as a loaded
	// cosign.key (cosignkey.LoadPrivateKey). Load it once per publication.
	Signer crypto.Signer
	// Progress, when set, is called after each artifact completes. Calls
	// are serialized; it must not block for long.
	Progress func(Result)
	// EnsureSignatures also checks the signature of artifacts whose tag is
	// already in place and adds this key's when it is missing (after a key
	// rotation). Default false: the tag is written last, so a tag naming the
	// expected digest means the artifact is complete and signed.
	EnsureSignatures bool
	// Recheck also checks an artifact whose tag is in place: its config
	// and layer blobs exist, and its signature manifest, payload and a
	// signature by Signer that verifies are there; what is missing is
	// pushed again (a blob or signature deleted from the registry since).
	// It implies EnsureSignatures and costs a few requests per artifact.
	// Default false: the tag alone says the artifact is complete.
	Recheck bool
}

// The kinds of artifact a Result reports.
const (
	KindValues  = "values"  // a target's values.yml
	KindRelease = "release" // the release manifest
)

// Result is the outcome for one artifact.
type Result struct {
	Kind       string `json:"kind"`       // KindValues or KindRelease
	Repository string `json:"repository"` // "registry[:port]/path"
	Tag        string `json:"tag"`        // "r<releaseVersion>"
	Digest     string `json:"digest"`     // manifest digest "sha256:<hex>"
	Size       int64  `json:"size"`       // manifest size
	// Pushed is true when this run uploaded the manifest, a blob or the
	// signature; false means everything was already present.
	Pushed bool `json:"pushed"`
	// Signed is true when this run uploaded a signature.
	Signed bool  `json:"signed"`
	Blobs  int   `json:"blobs"` // artifact blobs (config, layer) uploaded
	Bytes  int64 `json:"bytes"` // bytes uploaded: blobs, signature and manifests
}

// Ref returns "<repository>@<digest>".
func (r Result) Ref() string { return r.Repository + "@" + r.Digest }

// Summary totals a publication. Publish lists Results in request order
// (targets, then the release), only artifacts that completed; PublishSeq
// counts them without listing them.
type Summary struct {
	Results        []Result
	Pushed         int   // artifacts for which something was uploaded
	AlreadyPresent int   // artifacts found complete, nothing uploaded
	Bytes          int64 // bytes uploaded
}

// Publish pushes and signs every artifact of req, at most Concurrency at a
// time. It is idempotent: an artifact whose tag already names the expected
// manifest costs one request (a HEAD) and uploads nothing. The first
// failure cancels the rest and is returned together with the summary of
// what completed before it; a Result is only listed once its blobs,
// signature, manifest and tag are all in the registry. Every artifact is
// checked before anything is pushed. The release artifact is pushed last,
// once every target is complete: it is the publication's commit point (see
// Published). For a large publication, PublishSeq streams instead.
func (c *Client) Publish(ctx context.Context, req PublishRequest) (*Summary, error) {
	if req.Signer == nil {
		return nil, fmt.Errorf("publish: %w: no signer", ErrInvalid)
	}
	packs := make([]*packed, 0, len(req.Artifacts)+1)
	seen := map[string]int{}
	for i, a := range req.Artifacts {
		p, err := packArtifact(req.Prefix, a)
		if err != nil {
			return nil, fmt.Errorf("publish: %w", err)
		}
		key := p.repository + ":" + p.tag
		if j, dup := seen[key]; dup {
			return nil, fmt.Errorf("publish: %w: artifacts %d and %d both publish %s", ErrInvalid, j, i, key)
		}
		seen[key] = i
		packs = append(packs, p)
	}
	var release *packed
	rel, err := req.release()
	if err != nil {
		return nil, err
	}
	if rel != nil {
		p, err := packRelease(req.Prefix, *rel)
		if err != nil {
			return nil, fmt.Errorf("publish: %w", err)
		}
		release = p
	}
	results := make([]*Result, len(packs)+1)
	sum := &Summary{}
	err = c.run(ctx, req, sum, func(yield func(*packed) bool) error {
		for _, p := range packs {
			if !yield(p) {
				break
			}
		}
		return nil
	}, func() (*packed, error) { return release, nil }, func(i int, r Result) { results[i] = &r })
	for _, r := range results {
		if r != nil {
			sum.Results = append(sum.Results, *r)
		}
	}
	return sum, err
}

// PublishSeq pushes and signs the artifacts that artifacts yields, in a
// bounded stream: each is packed when the one before it has been handed to
// a pusher, at most Concurrency are in flight, and nothing is kept once
// pushed, so memory does not grow with the number of artifacts. The
// release artifact of req (if any) is pushed once every target is
// complete, as the publication's commit point (see Published); req's
// Artifacts must be empty. It is idempotent like Publish (an artifact
// already in place costs one HEAD); req.Progress sees every Result, and the
// returned Summary counts them but does not list them. The first failure
// (of the registry, an invalid artifact, or an error yielded by
// artifacts) stops the stream: what completed before it is in the
// registry, complete and signed, and a re-run finishes the rest. Two
// artifacts of the same repository and tag are refused when they differ
// (ErrConflict at the tag) and published once when they are equal.
func (c *Client) PublishSeq(ctx context.Context, req PublishRequest, artifacts iter.Seq2[Artifact, error]) (*Summary, error) {
	if req.Signer == nil {
		return nil, fmt.Errorf("publish: %w: no signer", ErrInvalid)
	}
	if len(req.Artifacts) > 0 {
		return nil, fmt.Errorf("publish: %w: PublishSeq takes its artifacts from the sequence, not the request", ErrInvalid)
	}
	if err := req.checkRelease(); err != nil { // before anything is pushed
		return nil, err
	}
	sum := &Summary{}
	err := c.run(ctx, req, sum, func(yield func(*packed) bool) error {
		i := 0
		for a, err := range artifacts {
			if err != nil {
				return fmt.Errorf("publish: artifact %d: %w", i, err)
			}
			p, err := packArtifact(req.Prefix, a)
			if err != nil {
				return fmt.Errorf("publish: artifact %d: %w", i, err)
			}
			i++
			if !yield(p) {
				return nil
			}
		}
		return nil
	}, func() (*packed, error) {
		rel, err := req.release()
		if rel == nil || err != nil {
			return nil, err
		}
		p, err := packRelease(req.Prefix, *rel)
		if err != nil {
			return nil, fmt.Errorf("publish: %w", err)
		}
		return p, nil
	}, nil)
	return sum, err
}

// release returns the request's release artifact (nil for none), built by
// ReleaseFrom when that is set.
func (req *PublishRequest) release() (*Release, error) {
	if err := req.checkRelease(); err != nil {
		return nil, err
	}
	rel := req.Release
	if req.ReleaseFrom != nil {
		var err error
		if rel, err = req.ReleaseFrom(); err != nil {
			return nil, fmt.Errorf("publish: release artifact: %w", err)
		}
	}
	if rel != nil && rel.Manifest == nil {
		return nil, fmt.Errorf("publish: %w: release %s r%d has no manifest bytes (a release named by its digest is looked up, not published)",
			ErrInvalid, rel.EnvTag, rel.ReleaseVersion)
	}
	return rel, nil
}

// checkRelease refuses a request that sets both Release and ReleaseFrom.
func (req *PublishRequest) checkRelease() error {
	if req.Release != nil && req.ReleaseFrom != nil {
		return fmt.Errorf("publish: %w: both Release and ReleaseFrom are set", ErrInvalid)
	}
	return nil
}

// run publishes the packs that packs yields, at most c.concurrency at a
// time: yield blocks while that many are in flight and returns false once
// one has failed. Then, once every one of them is complete, it publishes
// the release pack (when release returns one): the release artifact is the
// publication's commit point (see Published). Each completed Result is
// counted in sum, passed to req.Progress and to record (when set) with its
// position.
func (c *Client) run(ctx context.Context, req PublishRequest, sum *Summary, packs func(yield func(*packed) bool) error,
	release func() (*packed, error), record func(int, Result)) error {
	cfg := &configHome{}
	var mu sync.Mutex
	done := func(n int, res Result) {
		mu.Lock()
		defer mu.Unlock()
		sum.Bytes += res.Bytes
		if res.Pushed {
			sum.Pushed++
		} else {
			sum.AlreadyPresent++
		}
		if record != nil {
			record(n, res)
		}
		if req.Progress != nil {
			req.Progress(res)
		}
	}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(c.concurrency)
	i := 0
	err := packs(func(p *packed) bool {
		if gctx.Err() != nil {
			return false
		}
		n := i
		i++
		g.Go(func() error {
			res, err := c.publishOne(gctx, p, req.Signer, cfg, req.EnsureSignatures, req.Recheck)
			if err != nil {
				return fmt.Errorf("publish %s:%s: %w", p.repository, p.tag, err)
			}
			done(n, res)
			return nil
		})
		return true
	})
	if werr := g.Wait(); werr != nil {
		return werr
	}
	if err == nil {
		err = ctx.Err() // a cancelled stream is not a complete one
	}
	if err != nil {
		return err
	}
	p, err := release()
	if err != nil || p == nil {
		return err
	}
	res, err := c.publishOne(ctx, p, req.Signer, cfg, req.EnsureSignatures, req.Recheck)
	if err != nil {
		return fmt.Errorf("publish %s:%s: %w", p.repository, p.tag, err)
	}
	done(i, res)
	return nil
}

// Published reports whether the release artifact of rel is in place under
// prefix: its tag names the manifest that publishing rel would push. The
// release artifact is pushed only once every target artifact of its
// publication is complete (blobs, signature, manifest, tag), so true means
// an earlier run published the whole release; a re-publish can stop there
// (one request) instead of checking every artifact. It does not look at the
// target artifacts: something that removed one from the registry since is
// only repaired by publishing again without this shortcut.
func (c *Client) Published(ctx context.Context, prefix string, rel Release) (Result, bool, error) {
	p, err := packRelease(prefix, rel)
	if err != nil {
		return Result{}, false, fmt.Errorf("publish: %w", err)
	}
	res := p.result()
	repo, err := c.repository(ctx, p.repository)
	if err != nil {
		return res, false, err
	}
	ok, err := tagged(ctx, repo, p)
	if err != nil {
		return res, false, fmt.Errorf("%s: %w", p.repository, err)
	}
	return res, ok, nil
}

// result is what publishing p reports before anything is done.
func (p *packed) result() Result {
	return Result{Kind: p.kind, Repository: p.repository, Tag: p.tag, Digest: p.manifest.Digest.String(), Size: p.manifest.Size}
}

// tagged resolves p's tag in repo, the commit point of an artifact: true
// when it names p's manifest, false when it does not exist, ErrConflict
// when it names another manifest.
func tagged(ctx context.Context, repo *repo, p *packed) (bool, error) {
	desc, err := repo.Resolve(ctx, p.tag)
	switch {
	case errors.Is(err, errdef.ErrNotFound):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("resolve tag %s: %w", p.tag, err)
	case desc.Digest != p.manifest.Digest:
		return false, fmt.Errorf("%w: tag %s names %s, want %s", ErrConflict, p.tag, desc.Digest, p.manifest.Digest)
	}
	return true, nil
}

// publishOne makes p present, signed and tagged in its repository. The tag
// is written last, as the commit point: blobs, then the signature (cosign's
// tag scheme does not need the signed manifest to exist yet), then the
// manifest under its tag. So a tag that names the expected digest means
// the artifact was published completely, and checking it is the whole cost
// of an unchanged re-publish; an interrupted publish leaves no tag and is
// finished by the next run. With recheck, an artifact whose tag is in
// place has its blobs and signature checked and repaired as well
// (PublishRequest.Recheck).
func (c *Client) publishOne(ctx context.Context, p *packed, signer crypto.Signer, cfg *configHome, ensureSig, recheck bool) (Result, error) {
	res := p.result()
	repo, err := c.repository(ctx, p.repository)
	if err != nil {
		return res, err
	}
	// The one resolution of the tag; everything after works by digest.
	done, err := tagged(ctx, repo, p)
	if err != nil {
		return res, err
	}
	if done {
		if recheck {
			// The tag names the manifest, which names its blobs; the
			// registry does not keep them from being deleted.
			if err := pushBlobs(ctx, repo, p, cfg, &res); err != nil {
				return res, err
			}
		}
		if ensureSig || recheck {
			n, err := ensureSignature(ctx, repo, p.manifest.Digest, signer, recheck)
			if err != nil {
				return res, err
			}
			res.Signed = n > 0
			res.Bytes += n
		}
		res.Pushed = res.Bytes > 0
		return res, nil
	}
	if err := pushBlobs(ctx, repo, p, cfg, &res); err != nil {
		return res, err
	}
	n, err := ensureSignature(ctx, repo, p.manifest.Digest, signer, false)
	if err != nil {
		return res, err
	}
	res.Signed = n > 0
	res.Bytes += n
	if err := repo.pushReference(ctx, p.manifest, p.manifestB, p.tag); err != nil {
		return res, fmt.Errorf("push manifest %s: %w", p.manifest.Digest, err)
	}
	res.Pushed = true
	res.Bytes += p.manifest.Size
	return res, nil
}

// pushBlobs makes p's config and layer blobs present in repo, counting in
// res what it uploaded.
func pushBlobs(ctx context.Context, repo *repo, p *packed, cfg *configHome, res *Result) error {
	up, err := cfg.ensure(ctx, repo)
	if err != nil {
		return err
	}
	if up {
		res.Blobs++
		res.Bytes += emptyConfig.Size
	}
	if up, err = pushBlob(ctx, repo, p.layer, p.layerData); err != nil {
		return err
	}
	if up {
		res.Blobs++
		res.Bytes += p.layer.Size
	}
	return nil
}

// configHome remembers a repository of this registry that holds the empty
// config blob, so other repositories can mount it (one request) instead of
// uploading it (two). Every artifact and signature manifest uses it.
type configHome struct {
	mu   sync.Mutex
	repo string // repository path without the registry host
}

// ensure makes the empty config present in repo; it reports whether it
// had to be added. A target that cannot mount gets it uploaded.
func (h *configHome) ensure(ctx context.Context, repo *repo) (bool, error) {
	ok, err := repo.Exists(ctx, emptyConfig)
	if err != nil {
		return false, fmt.Errorf("check blob %s: %w", emptyConfig.Digest, err)
	}
	if ok {
		h.set(repo.path)
		return false, nil
	}
	h.mu.Lock()
	from := h.repo
	h.mu.Unlock()
	m, canMount := repo.Target.(orasreg.Mounter)
	if canMount && from != "" && from != repo.path {
		getContent := func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(emptyConfigData)), nil }
		if err := m.Mount(ctx, emptyConfig, from, getContent); err != nil && !errors.Is(err, errdef.ErrAlreadyExists) {
			return false, fmt.Errorf("mount blob %s from %s: %w", emptyConfig.Digest, from, err)
		}
	} else if err := repo.uploadBlob(ctx, emptyConfig, emptyConfigData); err != nil {
		return false, err
	}
	h.set(repo.path)
	return true, nil
}

func (h *configHome) set(repo string) {
	h.mu.Lock()
	if h.repo == "" {
		h.repo = repo
	}
	h.mu.Unlock()
}

// pushBlob uploads a blob unless the repository already has it.
func pushBlob(ctx context.Context, repo *repo, desc ocispec.Descriptor, data []byte) (bool, error) {
	ok, err := repo.Exists(ctx, desc)
	if err != nil {
		return false, fmt.Errorf("check blob %s: %w", desc.Digest, err)
	}
	if ok {
		return false, nil
	}
	if err := repo.uploadBlob(ctx, desc, data); err != nil {
		return false, err
	}
	return true, nil
}
