// Package strictjson decodes a JSON document received from outside (a
// request body, a runtime's answer, a token's claims) strictly: exactly one
// JSON value (RFC 8259), nothing but whitespace after it, and no member the
// destination struct does not declare.
package strictjson

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
)

// ErrTrailingData is returned for a document with data after its value.
var ErrTrailingData = errors.New("data after the JSON value")

// Decode decodes b into v, refusing unknown members and any data but
// whitespace after the value. json.Decoder.More alone does not: it reports
// no further value before a stray "}" or "]", which would then be ignored.
func Decode(b []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if _, err := dec.Token(); err != io.EOF {
		return ErrTrailingData
	}
	return nil
}
