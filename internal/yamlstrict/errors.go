package yamlstrict

import (
	"errors"
	"fmt"

	"github.com/configpub/configpub/internal/safetext"
)

// ErrRefused is wrapped by every *Error.
var ErrRefused = errors.New("refused")

// Class tells what kind of refusal an *Error is, so that a caller can map
// refusals to its own codes without reading the message.
type Class uint8

// Classes of refusal.
const (
	// Invalid: a key, tag, value or structure with no exact JSON
	// equivalent or with surprising YAML semantics, or nesting too deep.
	Invalid Class = iota
	// Syntax: not well-formed YAML, empty, too large, or more than one
	// document.
	Syntax
	// DuplicateKey: a mapping key appears twice.
	DuplicateKey
)

// Error is a refusal at a position in a source file.
type Error struct {
	File  string
	Line  int
	Field string // dotted path, e.g. spec.tools[2].name; "" for the document
	Msg   string
	Class Class
}

func (e *Error) Error() string {
	// The file name and field path are shown escaped: a name holding a
	// newline would otherwise start a line of its own (a forged log line
	// or CI annotation).
	file := safetext.Terminal(e.File)
	if e.Field == "" {
		return fmt.Sprintf("%s:%d: %s", file, e.Line, e.Msg)
	}
	return fmt.Sprintf("%s:%d: %s: %s", file, e.Line, safetext.Terminal(e.Field), e.Msg)
}

// Unwrap returns ErrRefused.
func (e *Error) Unwrap() error { return ErrRefused }
