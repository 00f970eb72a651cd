package client_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"strings"

	"github.com/configpub/configpub/bundle"
	"github.com/configpub/configpub/configserver/client"
)

// A program outside this module trusts the keys of a cosign.pub file (here
// two keys, as while a key is rotated).
func ExampleParseTrustedKeys() {
	var cosignPub []byte
	for range 2 {
		priv, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		der, _ := x509.MarshalPKIXPublicKey(&priv.PublicKey)
		cosignPub = append(cosignPub, pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der})...)
	}
	keys, err := client.ParseTrustedKeys(cosignPub) // os.ReadFile("cosign.pub")
	if err != nil {
		fmt.Println(err)
		return
	}
	_, err = client.New(client.Options{
		Identity:    bundle.Identity{Host: "payments.example", ServiceID: "agent-42", EnvTag: "prod"},
		Audience:    bundle.AudienceAgent,
		TrustedKeys: keys,
	})
	fmt.Println(len(keys), strings.HasPrefix(keys[0].ID, "sha256:"), err)

	_, err = client.ParseTrustedKeys([]byte("not a key"))
	fmt.Println(err)
	// Output:
	// 2 true <nil>
	// trusted keys: parse public key: no PUBLIC KEY PEM block found
}
