package signing

import (
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"strings"
	"testing"
)

func newKey(t *testing.T, c elliptic.Curve) *ecdsa.PrivateKey {
	t.Helper()
	k, err := ecdsa.GenerateKey(c, rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func TestSignAndVerifyBlob(t *testing.T) {
	a, b := newKey(t, elliptic.P256()), newKey(t, elliptic.P256())
	ka, err := NewTrustedKey(&a.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	kb, err := NewTrustedKey(&b.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	keys := []TrustedKey{kb, ka}
	msg := []byte(`{"sequence":1}`)
	sig, err := SignBlob(a, msg)
	if err != nil {
		t.Fatal(err)
	}
	// cosign's blob format: base64 of an ASN.1 signature over SHA-256.
	der, err := base64.StdEncoding.DecodeString(sig)
	if sum := sha256.Sum256(msg); err != nil || !ecdsa.VerifyASN1(&a.PublicKey, sum[:], der) {
		t.Fatalf("signature is not base64 ASN.1 over SHA-256 (%v)", err)
	}
	for _, tt := range []struct {
		name, keyID string
		msg         []byte
		sig         string
		want        string
		wantErr     error
	}{
		{"any key", "", msg, sig, ka.ID, nil},
		{"named key", ka.ID, msg, sig, ka.ID, nil},
		{"other key named", kb.ID, msg, sig, "", ErrBadSignature},
		{"unknown key named", "sha256:" + strings.Repeat("0", 64), msg, sig, "", ErrBadSignature},
		{"altered message", "", []byte(`{"sequence":2}`), sig, "", ErrBadSignature},
		{"not base64", "", msg, "!!", "", nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, err := VerifyBlob(keys, tt.msg, tt.sig, tt.keyID)
			switch {
			case tt.want != "":
				if err != nil || got != tt.want {
					t.Errorf("got %q, %v; want %q", got, err, tt.want)
				}
			case tt.wantErr != nil:
				if !errors.Is(err, tt.wantErr) {
					t.Errorf("got %q, %v; want %v", got, err, tt.wantErr)
				}
			default:
				if err == nil {
					t.Errorf("got %q, want an error", got)
				}
			}
		})
	}
}

func TestKeyIDIsTheDigestOfThePKIXDER(t *testing.T) {
	k := newKey(t, elliptic.P256())
	der, err := x509.MarshalPKIXPublicKey(&k.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(der)
	id, err := KeyID(&k.PublicKey)
	if want := "sha256:" + hex.EncodeToString(sum[:]); err != nil || id != want {
		t.Errorf("got %s (%v), want %s", id, err, want)
	}
}

func TestParsePublicKeys(t *testing.T) {
	a, b := newKey(t, elliptic.P256()), newKey(t, elliptic.P256())
	pa, err := MarshalPublicKey(&a.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	pb, _ := MarshalPublicKey(&b.PublicKey)
	other := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: []byte("x")})
	keys, err := ParsePublicKeys(append(append(append([]byte{}, pa...), other...), pb...))
	if err != nil || len(keys) != 2 || !keys[0].Key.Equal(&a.PublicKey) || !keys[1].Key.Equal(&b.PublicKey) {
		t.Fatalf("got %d keys, %v; want a and b in order, other blocks skipped", len(keys), err)
	}
	if id, _ := KeyID(&a.PublicKey); keys[0].ID != id {
		t.Errorf("key id %s, want %s", keys[0].ID, id)
	}

	p384 := newKey(t, elliptic.P384())
	p384PEM, _ := MarshalPublicKey(&p384.PublicKey)
	edPub, _, _ := ed25519.GenerateKey(rand.Reader)
	edDER, _ := x509.MarshalPKIXPublicKey(edPub)
	for name, data := range map[string][]byte{
		"empty":         nil,
		"no PEM":        []byte("ssh-ed25519 AAAA"),
		"only a cert":   other,
		"P-384":         p384PEM,
		"Ed25519":       pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: edDER}),
		"damaged block": pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: []byte("not DER")}),
	} {
		if keys, err := ParsePublicKeys(data); err == nil {
			t.Errorf("%s: got %d keys, want an error", name, len(keys))
		}
	}
}
