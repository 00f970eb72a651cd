package gittest

import (
	"bytes"
	"crypto"
	"fmt"
	"testing"

	"github.com/ProtonMail/go-crypto/openpgp"
	"github.com/ProtonMail/go-crypto/openpgp/armor"
	"github.com/ProtonMail/go-crypto/openpgp/packet"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"
)

// Key is an OpenPGP signing key generated for a test.
type Key struct {
	Entity *openpgp.Entity
	// Armored is the armored public keyring holding only this key, the form
	// review.Options.RequireSignedBy takes.
	Armored string
}

// NewKey generates an Ed25519 OpenPGP key for name <email>.
func NewKey(t testing.TB, name, email string) *Key {
	t.Helper()
	return newKey(t, name, email, &packet.Config{Algorithm: packet.PubKeyAlgoEdDSA})
}

// NewWebFlowKey generates a test key of the kind GitHub signs web-flow
// commits with: RSA 2048, SHA-256 signatures, user ID "GitHub
// <noreply@github.com>". It is not GitHub's key.
func NewWebFlowKey(t testing.TB) *Key {
	t.Helper()
	return newKey(t, "GitHub", "noreply@github.com", &packet.Config{Algorithm: packet.PubKeyAlgoRSA, RSABits: 2048, DefaultHash: crypto.SHA256})
}

func newKey(t testing.TB, name, email string, cfg *packet.Config) *Key {
	t.Helper()
	e, err := openpgp.NewEntity(name, "", email, cfg)
	if err != nil {
		t.Fatalf("gittest: generate OpenPGP key: %v", err)
	}
	var buf bytes.Buffer
	w, err := armor.Encode(&buf, openpgp.PublicKeyType, nil)
	if err != nil {
		t.Fatalf("gittest: armor public key: %v", err)
	}
	if err := e.Serialize(w); err != nil {
		t.Fatalf("gittest: serialize public key: %v", err)
	}
	if err := w.Close(); err != nil {
		t.Fatalf("gittest: armor public key: %v", err)
	}
	return &Key{Entity: e, Armored: buf.String() + "\n"}
}

// sign returns the armored detached signature Git stores in a commit's gpgsig header.
func (k *Key) sign(c *object.Commit) (string, error) {
	encoded := &plumbing.MemoryObject{}
	if err := c.EncodeWithoutSignature(encoded); err != nil {
		return "", err
	}
	r, err := encoded.Reader()
	if err != nil {
		return "", err
	}
	var sig bytes.Buffer
	if err := openpgp.ArmoredDetachSign(&sig, k.Entity, r, nil); err != nil {
		return "", fmt.Errorf("openpgp sign: %w", err)
	}
	return sig.String(), nil
}
