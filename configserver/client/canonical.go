package client

import "github.com/configpub/configpub/internal/jcs"

// canonicalDigest returns "sha256:" + hex(SHA-256(RFC 8785 bytes of v)) for
// the JSON-compatible values parseValues produces (map[string]any, []any,
// string, int64, float64, bool, nil). jcs.AppendValue writes the canonical
// form directly instead of going through encoding/json and a re-parse, which
// is most of the cost of a Load.
func canonicalDigest(v any) (string, error) {
	b, err := jcs.AppendValue(make([]byte, 0, 4096), v)
	if err != nil {
		return "", err
	}
	return jcs.BytesDigest(b), nil
}
