package registry

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"time"

	digest "github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"oras.land/oras-go/v2/content"
	"oras.land/oras-go/v2/errdef"

	"github.com/configpub/configpub/internal/signing"
)

// KeepDeliveryManifests is how many delivery-manifest referrers a prune
// keeps on an artifact: the newest, and the one before it for a runtime
// that listed the referrers just before the newest was attached.
const KeepDeliveryManifests = 2

// maxPruneRead bounds how many referrers one prune reads (manifest and
// layer) to tell the genuine from the others; the rest are left for the
// next prune.
const maxPruneRead = 32

// KeepOptions say which delivery-manifest referrers a prune keeps. A
// referrer is genuine when its signature verifies with one of Keys or
// Issued vouches for it; Keys or Issued is required. The annotations of a
// referrer are not signed (anyone who can push to the repository can attach
// one with any sequence), so genuine referrers are ordered by the sequence
// and issuedAt of their signed bytes.
type KeepOptions struct {
	// Keep is how many genuine referrers stay, the newest; the referrer
	// just attached (AttachDeliveryManifestKeeping) is always one of them.
	// Zero prunes nothing.
	Keep int
	// Keys are the trusted delivery-manifest keys.
	Keys []signing.TrustedKey
	// Issued reports whether m (bytes, signature and key id as the
	// referrer carries them) is a manifest the caller issued for the
	// artifact: a promoter that holds the manifests it signed, not the
	// public keys. Its error stops the prune.
	Issued func(ctx context.Context, m SignedDeliveryManifest) (bool, error)
}

// PruneDeliveryManifests removes from the values artifact at ref
// (REPOSITORY@DIGEST) its genuine delivery-manifest referrers beyond the
// newest keep.Keep (KeepOptions) and the referrers that are not genuine
// (not signed by a trusted key, not issued, damaged, or stored without
// their layer blob: they can never verify), and returns how many it
// removed. It reads at most 32 referrers, the newest by their
// annotations; those beyond stay for the next prune. Every renewal
// attached adds one, and a runtime pulling from the registry lists them all
// at every load: without pruning an artifact renewed every five minutes
// carries 8,640 after a month, and a registry that keeps the list in a
// tagged index (no referrers API: Distribution) rewrites that whole index
// at every attach. The superseded ones vouch for nothing a runtime would
// accept (it refuses a lower sequence or an ended lease). A removed
// referrer is deleted; on a registry that keeps the list in a tagged index
// and does not allow deletes (Distribution's default) it is taken off the
// list and its manifest stays stored. A referrer already removed (a
// concurrent prune) is not an error. A referrer that cannot be read for
// another reason (a cut connection, a stored blob the registry cannot
// serve) is left as it is and counts toward the 32; the others are pruned
// all the same, and the error names it with how many were removed.
func (c *Client) PruneDeliveryManifests(ctx context.Context, ref string, keep KeepOptions) (int, error) {
	if keep.Keep < 1 {
		return 0, fmt.Errorf("prune delivery manifests of %s: %w: keep %d, want at least 1", ref, ErrInvalid, keep.Keep)
	}
	repoName, dgst, err := ParseRef(ref)
	if err != nil {
		return 0, fmt.Errorf("prune delivery manifests: %w", err)
	}
	repo, err := c.repository(ctx, repoName)
	if err != nil {
		return 0, fmt.Errorf("prune delivery manifests: %w", err)
	}
	subject, err := repo.Resolve(ctx, dgst.String())
	if err != nil {
		if errors.Is(err, errdef.ErrNotFound) {
			return 0, fmt.Errorf("prune delivery manifests of %s: %w: artifact not found", ref, ErrNotFound)
		}
		return 0, fmt.Errorf("prune delivery manifests of %s: %w", ref, err)
	}
	subject.Digest = dgst
	return prune(ctx, repo, subject, ref, keep, "")
}

// prune removes subject's delivery-manifest referrers as
// PruneDeliveryManifests does, never the one at attached (empty: none).
func prune(ctx context.Context, repo *repo, subject ocispec.Descriptor, ref string, keep KeepOptions, attached digest.Digest) (int, error) {
	if len(keep.Keys) == 0 && keep.Issued == nil {
		return 0, fmt.Errorf("prune delivery manifests of %s: %w: no trusted keys and no way to tell issued manifests", ref, ErrInvalid)
	}
	found, err := deliveryReferrers(ctx, repo, subject)
	if err != nil {
		return 0, fmt.Errorf("prune delivery manifests of %s: %w", ref, err)
	}
	type genuine struct {
		d        ocispec.Descriptor
		sequence int64
		issuedAt string
	}
	var good []genuine
	var remove []ocispec.Descriptor
	kept := 0
	// unread counts the referrers that could not be read (a cut
	// connection, a registry error, a stored blob that cannot be served):
	// each is left as it is, neither kept nor removed, and the others are
	// pruned all the same; unreadable is the first one's error.
	unread := 0
	var unreadable error
	for _, d := range found {
		if d.Digest == attached {
			kept = 1
			continue
		}
		if len(good)+len(remove)+unread == maxPruneRead {
			break
		}
		s, err := readDeliveryManifest(ctx, repo, d)
		switch {
		case errors.Is(err, ErrInvalid), errors.Is(err, ErrDigestMismatch), errors.Is(err, errLayerMissing):
			remove = append(remove, d) // damaged, or its layer gone: vouches for nothing
			continue
		case errors.Is(err, errdef.ErrNotFound):
			continue // removed by a concurrent prune
		case err != nil && ctx.Err() != nil:
			return 0, fmt.Errorf("prune delivery manifests of %s: read %s: %w", ref, d.Digest, err)
		case err != nil:
			unread++
			if unreadable == nil {
				unreadable = fmt.Errorf("read %s: %w", d.Digest, err)
			}
			continue
		}
		ok, err := isGenuine(ctx, keep, s)
		if err != nil {
			return 0, fmt.Errorf("prune delivery manifests of %s: %s: %w", ref, d.Digest, err)
		}
		if !ok {
			remove = append(remove, d)
			continue
		}
		seq, issued := signedOrder(s.Manifest)
		good = append(good, genuine{d: d, sequence: seq, issuedAt: issued})
	}
	sort.SliceStable(good, func(i, j int) bool {
		return newer(good[i].sequence, good[i].issuedAt, good[j].sequence, good[j].issuedAt)
	})
	for i, g := range good {
		if kept+i >= keep.Keep {
			remove = append(remove, g.d)
		}
	}
	removed, err := deleteReferrers(ctx, repo, ref, remove)
	if err == nil && unreadable != nil {
		err = fmt.Errorf("prune delivery manifests of %s: %d referrer(s) could not be read and were left as they are (%d others removed); first: %w", ref, unread, removed, unreadable)
	}
	return removed, err
}

// deleteReferrers removes the referrers remove of the repository at ref
// and returns how many it removed.
func deleteReferrers(ctx context.Context, repo *repo, ref string, remove []ocispec.Descriptor) (int, error) {
	if len(remove) == 0 {
		return 0, nil
	}
	del, ok := repo.Target.(content.Deleter)
	if !ok {
		return 0, fmt.Errorf("prune delivery manifests of %s: %w: the repository cannot delete", ref, ErrInvalid)
	}
	removed := 0
	for _, d := range remove {
		err := del.Delete(ctx, ocispec.Descriptor{MediaType: d.MediaType, Digest: d.Digest, Size: d.Size})
		switch {
		case err == nil, indexCleanupOnly(err):
			removed++
		case errors.Is(err, errdef.ErrNotFound):
		default:
			return removed, fmt.Errorf("prune delivery manifests of %s: delete %s: %w", ref, d.Digest, err)
		}
	}
	return removed, nil
}

// isGenuine reports whether keep's keys verify s, or its Issued vouches
// for it.
func isGenuine(ctx context.Context, keep KeepOptions, s SignedDeliveryManifest) (bool, error) {
	if len(keep.Keys) > 0 {
		if _, err := signing.VerifyBlob(keep.Keys, s.Manifest, s.Signature, s.KeyID); err == nil {
			return true, nil
		}
	}
	if keep.Issued == nil {
		return false, nil
	}
	return keep.Issued(ctx, s)
}

// signedOrder returns the sequence and issuedAt of a genuine referrer's
// signed bytes: what orders it, not its annotations.
func signedOrder(b []byte) (int64, string) {
	var signed struct {
		Sequence int64  `json:"sequence"`
		IssuedAt string `json:"issuedAt"`
	}
	_ = json.Unmarshal(b, &signed)
	return signed.Sequence, signed.IssuedAt
}

// newer orders (sequence, issuedAt) pairs, newest first.
func newer(sa int64, ia string, sb int64, ib string) bool {
	if sa != sb {
		return sa > sb
	}
	ta, _ := time.Parse(time.RFC3339Nano, ia)
	tb, _ := time.Parse(time.RFC3339Nano, ib)
	return ta.After(tb)
}
