package registry

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"sync"

	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"oras.land/oras-go/v2"
	"oras.land/oras-go/v2/content/memory"
	"oras.land/oras-go/v2/content/oci"
	"oras.land/oras-go/v2/errdef"
	orasreg "oras.land/oras-go/v2/registry"
)

// Storage opens the oras.Target that holds one repository
// ("registry[:port]/path", as Repository and ReleaseRepository name it).
// The Client works on any oras.Target (content.Storage plus tag
// resolution) and uses the optional capabilities a target has: a
// reference fetch or push in one call (oras-go's registry.ReferenceFetcher
// and registry.ReferencePusher), a cross-repository mount
// (registry.Mounter), and, for remote registries, the single-POST blob
// upload. Without them it falls back to Resolve+Fetch, Push+Tag and a plain
// upload.
type Storage interface {
	Repository(ctx context.Context, name string) (oras.Target, error)
}

// bytesPusher is the optional capability of storing a blob that is in
// memory in as few requests as the store allows (a remote registry's
// single-POST upload).
type bytesPusher interface {
	pushBytes(ctx context.Context, desc ocispec.Descriptor, data []byte) error
}

// repo is one repository's target with the name it was opened by.
type repo struct {
	oras.Target
	name string // "registry[:port]/path"
	path string // the repository's path in its registry, what a mount names
}

// fetchReference fetches the manifest ref (a tag or digest) names: in one
// request where the target can, else by Resolve then Fetch.
func (r *repo) fetchReference(ctx context.Context, ref string) (ocispec.Descriptor, io.ReadCloser, error) {
	if f, ok := r.Target.(orasreg.ReferenceFetcher); ok {
		return f.FetchReference(ctx, ref)
	}
	desc, err := r.Resolve(ctx, ref)
	if err != nil {
		return ocispec.Descriptor{}, nil, err
	}
	rc, err := r.Fetch(ctx, desc)
	if err != nil {
		return ocispec.Descriptor{}, nil, err
	}
	return desc, rc, nil
}

// pushReference stores the manifest data (described by desc) under tag: in
// one request where the target can, else by Push then Tag.
func (r *repo) pushReference(ctx context.Context, desc ocispec.Descriptor, data []byte, tag string) error {
	if p, ok := r.Target.(orasreg.ReferencePusher); ok {
		return p.PushReference(ctx, desc, bytes.NewReader(data), tag)
	}
	if err := r.Push(ctx, desc, bytes.NewReader(data)); err != nil && !errors.Is(err, errdef.ErrAlreadyExists) {
		return err
	}
	return r.Tag(ctx, desc, tag)
}

// uploadBlob stores data (described by desc). It does not check whether
// the blob exists; callers that may already have it ask first (pushBlob).
func (r *repo) uploadBlob(ctx context.Context, desc ocispec.Descriptor, data []byte) error {
	if p, ok := r.Target.(bytesPusher); ok {
		return p.pushBytes(ctx, desc, data)
	}
	if err := r.Push(ctx, desc, bytes.NewReader(data)); err != nil && !errors.Is(err, errdef.ErrAlreadyExists) {
		return fmt.Errorf("push blob %s: %w", desc.Digest, err)
	}
	return nil
}

// OCILayout returns a Storage that writes each repository under prefix
// ("registry[:port][/path]", where the artifacts will be copied to) as an
// OCI image layout directory dir/<path below prefix>, e.g.
// dir/prod/payments.example/agent-42 for
// registry.example/configpub/prod/payments.example/agent-42 with prefix
// registry.example/configpub. Tags and cosign signatures are kept, so
// `oras cp --from-oci-layout dir/<path>:<tag>` moves an artifact (and its
// sha256-<hex>.sig tag) to the registry, where `cosign verify` accepts it:
// signatures name the repository under prefix. A repository outside
// prefix is refused.
func OCILayout(dir, prefix string) Storage {
	prefix = strings.TrimSuffix(prefix, "/")
	return &stores{open: func(ctx context.Context, name string) (oras.Target, error) {
		rel, ok := strings.CutPrefix(name, prefix+"/")
		if !ok || prefix == "" {
			return nil, fmt.Errorf("%w repository %q: not under the layout's prefix %q", ErrInvalid, name, prefix)
		}
		for _, el := range strings.Split(rel, "/") {
			if el == "" || el == "." || el == ".." {
				return nil, fmt.Errorf("%w repository %q: path element %q", ErrInvalid, name, el)
			}
		}
		s, err := oci.NewWithContext(ctx, filepath.Join(dir, filepath.FromSlash(rel)))
		if err != nil {
			return nil, fmt.Errorf("oci layout %s: %w", rel, err)
		}
		return s, nil
	}}
}

// Memory returns a Storage that keeps every repository in an oras-go
// memory store (for tests and dry runs). Manifests are also found by
// digest, as in a registry.
func Memory() Storage {
	return &stores{open: func(context.Context, string) (oras.Target, error) {
		return &memoryTarget{memory.New()}, nil
	}}
}

// stores opens each repository once and hands out the same target after
// (an OCI layout's index must have one writer).
type stores struct {
	open func(ctx context.Context, name string) (oras.Target, error)
	mu   sync.Mutex
	m    map[string]oras.Target
}

func (s *stores) Repository(ctx context.Context, name string) (oras.Target, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if t, ok := s.m[name]; ok {
		return t, nil
	}
	t, err := s.open(ctx, name)
	if err != nil {
		return nil, err
	}
	if s.m == nil {
		s.m = map[string]oras.Target{}
	}
	s.m[name] = t
	return t, nil
}

// memoryTarget is an oras-go memory store whose manifests resolve by
// digest too.
type memoryTarget struct{ *memory.Store }

func (m *memoryTarget) Push(ctx context.Context, desc ocispec.Descriptor, r io.Reader) error {
	if err := m.Store.Push(ctx, desc, r); err != nil {
		return err
	}
	switch desc.MediaType {
	case ocispec.MediaTypeImageManifest, ocispec.MediaTypeImageIndex:
		return m.Store.Tag(ctx, desc, desc.Digest.String())
	}
	return nil
}
