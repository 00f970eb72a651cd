package yamlstrict

import (
	"errors"
	"fmt"
)

// ErrRefused is wrapped by every *Error.
var ErrRefused = errors.New("refused")

// Error is a refusal at a position in a source file.
type Error struct {
	File  string
	Line  int
	Field string // dotted path, e.g. spec.tools[2].name; "" for the document
	Msg   string
}

func (e *Error) Error() string {
	if e.Field == "" {
		return fmt.Sprintf("%s:%d: %s", e.File, e.Line, e.Msg)
	}
	return fmt.Sprintf("%s:%d: %s: %s", e.File, e.Line, e.Field, e.Msg)
}

// Unwrap returns ErrRefused.
func (e *Error) Unwrap() error { return ErrRefused }
