package promotertest

import (
	"fmt"

	"github.com/google/uuid"
)

// ns is the namespace of ID.
var ns = uuid.MustParse("6ba7b811-9dad-11d1-80b4-00c04fd430c8")

// ID is a deterministic command UUID (version 5) named by parts.
func ID(parts ...any) string {
	return uuid.NewSHA1(ns, []byte(fmt.Sprint(parts...))).String()
}
