package webflow_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/configpub/configpub/internal/gittest"
	"github.com/configpub/configpub/internal/webflow"
)

// The published facts the embedded file must match, written out here
// rather than read from the package so the test fails if either drifts.
var published = []string{
	"5DE3E0509C47EA3CF04A42D34AEE18F83AFDEB23", // key ID 4AEE18F83AFDEB23, expired 2024-01-16
	"968479A1AFF927E37D1A566BB5690EEEBB952194", // key ID B5690EEEBB952194, current
}

// TestEmbeddedKeysAreGitHubsWebFlowKeys parses the shipped file with the
// OpenPGP library --require-signed-by uses and compares the fingerprints
// computed from the key material with GitHub's published ones.
func TestEmbeddedKeysAreGitHubsWebFlowKeys(t *testing.T) {
	k, err := webflow.Keyring()
	if err != nil {
		t.Fatal(err)
	}
	got, err := webflow.KeyFingerprints(k)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(got, " ") != strings.Join(published, " ") {
		t.Fatalf("embedded fingerprints %v, want %v", got, published)
	}
	if strings.Join(webflow.Fingerprints, " ") != strings.Join(published, " ") {
		t.Fatalf("pinned fingerprints %v, want %v", webflow.Fingerprints, published)
	}
}

// TestCheckRefusesOtherKeys: a key file offered as the web-flow keys with
// other fingerprints (a test key in web-flow form, or only one of the two
// keys) is refused.
func TestCheckRefusesOtherKeys(t *testing.T) {
	impostor := gittest.NewWebFlowKey(t)
	k, _ := webflow.Keyring()
	for name, keyring := range map[string]string{
		"impostor":            impostor.Armored,
		"web-flow + impostor": k + "\n" + impostor.Armored,
	} {
		if err := webflow.Check(keyring); !errors.Is(err, webflow.ErrFingerprint) {
			t.Errorf("%s: got %v, want ErrFingerprint", name, err)
		}
	}
	if err := webflow.Check("not a key"); err == nil {
		t.Error("garbage accepted")
	}
}
