package promoter

import (
	"bytes"
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/x509"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/configpub/configpub/internal/signing"
)

// SigningKeyAlgorithm is the algorithm configpub signs with (ECDSA P-256
// over SHA-256, cosign's), as configpub.signing_key records it.
const SigningKeyAlgorithm = "ecdsa-p256-sha256"

// SigningKey is a public key the store has signed with
// (configpub.signing_key, migration 29).
type SigningKey struct {
	signing.TrustedKey
	// Algorithm is SigningKeyAlgorithm.
	Algorithm string
	// FirstUsed and LastUsed are when an operation of the store first and
	// last set out to sign with the key (by its clock; recorded before it
	// signs), from migration 29 on: a key last used before it is recorded
	// at its next use only.
	FirstUsed, LastUsed time.Time
}

// RecordSigningKey records pub as a key the store signs with
// (configpub.signing_key): the first time, with its public key (PKIX DER),
// algorithm and the store's clock as its first and last use; after that,
// it moves the last use forward. A key id recorded with another public key
// (which the table's check on key_id refuses, so only a hand edit of the
// database makes it) is ErrIntegrity naming the key id, with nothing
// written. Every operation that signs delivery manifests records its
// Signer's key before it signs, and promote records its Signer's before it
// publishes, so no signature of the store exists by a key it has not
// recorded. On a database before migration 29 it records nothing.
func (s *Store) RecordSigningKey(ctx context.Context, pub crypto.PublicKey) error {
	if !s.keys {
		return nil
	}
	ec, ok := pub.(*ecdsa.PublicKey)
	if !ok || ec.Curve.Params().Name != "P-256" {
		return fmt.Errorf("record signing key: %w: want an ECDSA P-256 key, got %T", ErrInvalid, pub)
	}
	der, err := x509.MarshalPKIXPublicKey(ec)
	if err != nil {
		return fmt.Errorf("record signing key: %w", err)
	}
	id, err := signing.KeyID(ec)
	if err != nil {
		return fmt.Errorf("record signing key: %w", err)
	}
	now := s.now()
	// One short statement of its own, outside the signing transaction:
	// the row is the same for every environment, and a lock on it held
	// for a whole activation would serialize the environments' moves and
	// renewals.
	var recorded bool
	err = s.pool.QueryRow(ctx, `INSERT INTO configpub.signing_key AS k (key_id, public_key, algorithm, first_used_at, last_used_at)
		VALUES ($1, $2, $3, $4, $4)
		ON CONFLICT (key_id) DO UPDATE SET last_used_at = greatest(k.last_used_at, EXCLUDED.last_used_at)
		WHERE k.public_key = EXCLUDED.public_key AND k.algorithm = EXCLUDED.algorithm
		RETURNING true`, id, der, SigningKeyAlgorithm, now).Scan(&recorded)
	if err == nil {
		return nil
	}
	if !errors.Is(err, pgx.ErrNoRows) {
		return dbErr(fmt.Sprintf("record signing key %s", id), err)
	}
	var stored []byte
	var alg string
	if err := s.pool.QueryRow(ctx, `SELECT public_key, algorithm FROM configpub.signing_key WHERE key_id = $1`, id).Scan(&stored, &alg); err != nil {
		return dbErr(fmt.Sprintf("record signing key %s", id), err)
	}
	what := "another public key"
	if bytes.Equal(stored, der) {
		what = fmt.Sprintf("algorithm %q, not %q", alg, SigningKeyAlgorithm)
	}
	return fmt.Errorf("record signing key: %w: key id %s is recorded with %s (a forged or hand-edited configpub.signing_key row, or a misconfigured key); nothing was signed",
		ErrIntegrity, id, what)
}

// SigningKeys returns the keys the store has signed with, in the order of
// their first use (none on a database before migration 29).
func (s *Store) SigningKeys(ctx context.Context) ([]SigningKey, error) {
	if !s.keys {
		return nil, nil
	}
	rows, err := s.pool.Query(ctx, `SELECT key_id, public_key, algorithm, first_used_at, last_used_at
		FROM configpub.signing_key ORDER BY first_used_at, key_id`)
	if err != nil {
		return nil, dbErr("read signing keys", err)
	}
	defer rows.Close()
	var keys []SigningKey
	for rows.Next() {
		var k SigningKey
		var der []byte
		if err := rows.Scan(&k.ID, &der, &k.Algorithm, &k.FirstUsed, &k.LastUsed); err != nil {
			return nil, dbErr("read signing keys", err)
		}
		tk, err := parseRecordedKey(k.ID, der)
		if err != nil {
			return nil, err
		}
		k.Key = tk.Key
		keys = append(keys, k)
	}
	if err := rows.Err(); err != nil {
		return nil, dbErr("read signing keys", err)
	}
	return keys, nil
}

// parseRecordedKey parses a recorded PKIX DER public key and checks that it
// is the key of id.
func parseRecordedKey(id string, der []byte) (signing.TrustedKey, error) {
	pub, err := x509.ParsePKIXPublicKey(der)
	if err != nil {
		return signing.TrustedKey{}, fmt.Errorf("read signing key %s: %w: %w", id, ErrIntegrity, err)
	}
	ec, ok := pub.(*ecdsa.PublicKey)
	if !ok {
		return signing.TrustedKey{}, fmt.Errorf("read signing key %s: %w: a %T, not an ECDSA key", id, ErrIntegrity, pub)
	}
	tk, err := signing.NewTrustedKey(ec)
	if err != nil {
		return signing.TrustedKey{}, fmt.Errorf("read signing key %s: %w", id, err)
	}
	if tk.ID != id {
		return signing.TrustedKey{}, fmt.Errorf("read signing key %s: %w: the recorded public key's id is %s", id, ErrIntegrity, tk.ID)
	}
	return tk, nil
}
