package compiler

import (
	"bytes"
	"context"
	"fmt"
	"io/fs"
	"slices"
	"strings"

	"github.com/configpub/configpub/bundle"
	"github.com/configpub/configpub/internal/policytree"
	"github.com/configpub/configpub/internal/render"
)

// maxInputsNamed bounds the inputs a stale release's message names.
const maxInputsNamed = 10

// inputChanges is what changed among a release's inputs since it was
// compiled, for the message of a stale release.
type inputChanges struct {
	files []string // inputs edited, added or gone, by path
	hosts []string // hosts whose own inputs changed where no file could be named
}

// describe says what changed since release n was compiled, or "" when
// nothing is known to have.
func (ic inputChanges) describe(n int64) string {
	var parts []string
	if len(ic.files) > 0 {
		names := ic.files
		more := ""
		if len(names) > maxInputsNamed {
			names, more = names[:maxInputsNamed], fmt.Sprintf(" and %d more", len(ic.files)-maxInputsNamed)
		}
		parts = append(parts, fmt.Sprintf("sources edited since release %d was compiled: %s%s", n, strings.Join(names, ", "), more))
	}
	for _, h := range ic.hosts {
		parts = append(parts, fmt.Sprintf("the inputs of host %s changed since release %d was compiled", h, n))
	}
	return strings.Join(parts, "; ")
}

// changedInputs compares the inputs the derived release d reads with those
// the committed release was compiled from. The inputs its root lists are
// compared by their recorded digests; a host's own inputs are recorded as
// one digest per host, so the files of a host whose digest changed are
// named by reading them in the tree the release was compiled from
// (Options.Introduced), and the host is named when there is no such tree.
// Nothing here fails a compile: what cannot be told is left out.
func changedInputs(ctx context.Context, opts Options, committedFS fs.FS, committed *bundle.Manifest, d *Result) inputChanges {
	var ic inputChanges
	was := map[string]string{}
	for _, in := range committed.Inputs {
		was[in.Path] = in.Digest
	}
	for _, in := range d.Manifest.Inputs {
		if was[in.Path] != in.Digest {
			ic.files = append(ic.files, in.Path)
		}
		delete(was, in.Path)
	}
	for p := range was {
		ic.files = append(ic.files, p) // no longer read, or now one host's own
	}
	wasHost := map[string]string{}
	for _, h := range committed.HostInputs {
		wasHost[h.Host] = h.Digest
	}
	var hosts []string
	for _, h := range d.Manifest.HostInputs {
		if wasHost[h.Host] != h.Digest {
			hosts = append(hosts, h.Host)
		}
	}
	if len(hosts) > 0 {
		tree := introducedTree(ctx, opts, committedFS)
		for _, h := range hosts {
			named := false
			own, ok := d.ownInputs[h]
			for _, in := range own {
				if tree == nil {
					break
				}
				b, err := fs.ReadFile(tree, in.Path)
				if err != nil || render.BytesDigest(LF(b)) != in.Digest {
					ic.files = append(ic.files, in.Path)
					named = true
				}
			}
			if tree == nil || !ok || !named {
				ic.hosts = append(ic.hosts, h)
			}
		}
	}
	slices.Sort(ic.files)
	ic.files = slices.Compact(ic.files)
	return ic
}

// introducedTree returns the tree opts.Introduced gives, when its release
// file is the committed one byte for byte, else nil.
func introducedTree(ctx context.Context, opts Options, committedFS fs.FS) fs.FS {
	if opts.Introduced == nil {
		return nil
	}
	tree, err := opts.Introduced(ctx, opts.EnvTag)
	if err != nil || tree == nil {
		return nil
	}
	tree = policytree.New(tree, policytree.Limits{})
	p := ManifestPath(opts.EnvTag)
	then, err := fs.ReadFile(tree, p)
	if err != nil {
		return nil
	}
	now, err := fs.ReadFile(policytree.New(committedFS, policytree.Limits{}), p)
	if err != nil || !bytes.Equal(now, then) {
		return nil
	}
	return tree
}

// sameValues reports whether every target of the derived release has the
// committed one's policy, content and property-set digests: the sources
// changed, the targets' values did not.
func sameValues(committed, derived *bundle.Manifest) bool {
	if len(committed.Targets) != len(derived.Targets) {
		return false
	}
	type values struct{ policy, content, props string }
	was := make(map[[2]string]values, len(committed.Targets))
	for i := range committed.Targets {
		t := &committed.Targets[i]
		was[[2]string{t.Host, t.ServiceID}] = values{t.PolicyDigest, t.ContentDigest, t.PropertySetDigest}
	}
	for i := range derived.Targets {
		t := &derived.Targets[i]
		if v, ok := was[[2]string{t.Host, t.ServiceID}]; !ok || v != (values{t.PolicyDigest, t.ContentDigest, t.PropertySetDigest}) {
			return false
		}
	}
	return true
}
