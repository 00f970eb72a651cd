package main

import (
	"bytes"
	"fmt"
	"io"
	"os"

	"github.com/configpub/configpub/internal/cosignkey"
	"github.com/configpub/configpub/promoter"
)

// followedKey is the --key file of a long-running process that signs
// (lease renew --interval, gate).
type followedKey struct {
	path     string
	who      string // the process, as its messages name it
	data     []byte // the content signing now
	reported string // the last problem reported, not repeated
}

// followKey starts following the key file at path for who. Call it before
// the store loads the key: if the file changes in between, the first
// follow loads it again.
func followKey(path, who string) *followedKey {
	data, _ := os.ReadFile(path)
	return &followedKey{path: path, who: who, data: data}
}

// follow reads the key file again and, when it changed and its key can be
// loaded with COSIGN_PASSWORD, returns store signing with it; otherwise
// store. A key that cannot be loaded (a new password, a half-written or
// removed file) is reported once and the key in use goes on signing.
func (k *followedKey) follow(store *promoter.Store, errOut io.Writer) *promoter.Store {
	data, err := os.ReadFile(k.path)
	if err == nil && bytes.Equal(data, k.data) {
		k.reported = ""
		return store
	}
	var next *promoter.Store
	if err == nil {
		var password []byte
		if password, err = cosignPassword(); err == nil {
			var signer *cosignkey.Signer
			if signer, err = cosignkey.LoadPrivateKey(data, password); err == nil {
				next, err = store.WithSigner(signer)
			}
		}
	}
	if err != nil {
		if msg := err.Error(); msg != k.reported {
			fmt.Fprintf(errOut, "%s: %s changed but cannot be used (%v); key %s goes on signing\n", k.who, k.path, err, store.KeyID())
			k.reported = msg
		}
		return store
	}
	fmt.Fprintf(errOut, "%s: %s changed: signing with key %s (was %s)\n", k.who, k.path, next.KeyID(), store.KeyID())
	k.data, k.reported = data, ""
	return next
}
