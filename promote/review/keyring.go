package review

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/ProtonMail/go-crypto/openpgp"
	"github.com/ProtonMail/go-crypto/openpgp/armor"
)

// normalizeKeyring reads every armored public-key block in armored (a file of
// concatenated `gpg --export --armor` outputs is common) and returns one
// armored keyring holding all their keys, the form commit.Verify reads.
func normalizeKeyring(armored string) (string, error) {
	var keys openpgp.EntityList
	// armor.Decode buffers its input; sharing one bufio.Reader keeps the
	// bytes after the first block readable.
	r := bufio.NewReader(strings.NewReader(armored))
	for {
		block, err := armor.Decode(r)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return "", fmt.Errorf("%w: block %d: %v", ErrBadKeyring, len(keys)+1, err)
		}
		if block.Type != openpgp.PublicKeyType && block.Type != openpgp.PrivateKeyType {
			return "", fmt.Errorf("%w: unexpected armor block %q", ErrBadKeyring, block.Type)
		}
		list, err := openpgp.ReadKeyRing(block.Body)
		if err != nil {
			return "", fmt.Errorf("%w: %v", ErrBadKeyring, err)
		}
		keys = append(keys, list...)
	}
	if len(keys) == 0 {
		return "", fmt.Errorf("%w: no armored OpenPGP public key found", ErrBadKeyring)
	}
	var buf bytes.Buffer
	w, err := armor.Encode(&buf, openpgp.PublicKeyType, nil)
	if err != nil {
		return "", fmt.Errorf("%w: %v", ErrBadKeyring, err)
	}
	for _, e := range keys {
		if err := e.Serialize(w); err != nil {
			return "", fmt.Errorf("%w: %v", ErrBadKeyring, err)
		}
	}
	if err := w.Close(); err != nil {
		return "", fmt.Errorf("%w: %v", ErrBadKeyring, err)
	}
	return buf.String(), nil
}
