// Package webflow ships GitHub's web-flow OpenPGP public keys: the keys
// GitHub signs merge, squash and web-editor commits with. `promote
// --require-signed-by github` uses them, so a review gate GitHub can satisfy
// needs no download at promotion time.
//
// The keys are pinned by fingerprint: Keyring refuses the embedded file, and
// Check refuses any file offered as the web-flow keys, unless its keys'
// fingerprints are exactly the published ones.
package webflow

import (
	"bufio"
	_ "embed"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/ProtonMail/go-crypto/openpgp"
	"github.com/ProtonMail/go-crypto/openpgp/armor"
)

// Name is the --require-signed-by value that selects the embedded keys.
const Name = "github"

// Fingerprints are GitHub's published web-flow key fingerprints (upper-case
// hex): the key used until 2024-01-16 (key ID 4AEE18F83AFDEB23, expired)
// and its successor (key ID B5690EEEBB952194).
var Fingerprints = []string{
	"5DE3E0509C47EA3CF04A42D34AEE18F83AFDEB23",
	"968479A1AFF927E37D1A566BB5690EEEBB952194",
}

// armored is https://github.com/web-flow.gpg as published.
//
//go:embed web-flow.gpg
var armored string

// ErrFingerprint marks a key file whose fingerprints are not GitHub's
// web-flow fingerprints.
var ErrFingerprint = errors.New("not GitHub's web-flow keys")

// Keyring returns the embedded armored keyring after checking its
// fingerprints.
func Keyring() (string, error) {
	if err := Check(armored); err != nil {
		return "", fmt.Errorf("embedded web-flow keys: %w", err)
	}
	return armored, nil
}

// Check parses every armored public-key block in keyring and refuses it
// unless the set of primary-key fingerprints equals Fingerprints.
func Check(keyring string) error {
	got, err := KeyFingerprints(keyring)
	if err != nil {
		return err
	}
	want := append([]string(nil), Fingerprints...)
	sort.Strings(want)
	if strings.Join(got, " ") != strings.Join(want, " ") {
		return fmt.Errorf("%w: key fingerprints %s, want %s", ErrFingerprint, strings.Join(got, ", "), strings.Join(want, ", "))
	}
	return nil
}

// KeyFingerprints returns the sorted upper-case hex fingerprints of the
// primary keys in every armored public-key block of keyring.
func KeyFingerprints(keyring string) ([]string, error) {
	var fps []string
	r := bufio.NewReader(strings.NewReader(keyring))
	for {
		block, err := armor.Decode(r)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("read armored key block %d: %w", len(fps)+1, err)
		}
		if block.Type != openpgp.PublicKeyType {
			return nil, fmt.Errorf("armored block %q: want %q", block.Type, openpgp.PublicKeyType)
		}
		list, err := openpgp.ReadKeyRing(block.Body)
		if err != nil {
			return nil, fmt.Errorf("read key ring: %w", err)
		}
		for _, e := range list {
			fps = append(fps, fmt.Sprintf("%X", e.PrimaryKey.Fingerprint))
		}
	}
	if len(fps) == 0 {
		return nil, errors.New("no armored OpenPGP public key found")
	}
	sort.Strings(fps)
	return fps, nil
}
