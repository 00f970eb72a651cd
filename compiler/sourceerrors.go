package compiler

import (
	"fmt"
	"strings"
)

// MaxReported bounds the refusals one compile reports at once.
const MaxReported = 20

// SourceErrors is several refusals of policy input, reported together: every
// source file is parsed and schema-checked before the compile stops, so one
// run shows every broken file (each file's problems, up to MaxReported in
// all). errors.As finds the first *SourceError; errors.Is reports
// ErrInvalidSource.
type SourceErrors struct {
	Errs    []error // in file order, then location order
	Omitted int     // refusals beyond MaxReported
}

func (e *SourceErrors) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d problems in the policy sources:", len(e.Errs)+e.Omitted)
	for _, err := range e.Errs {
		b.WriteString("\n  ")
		b.WriteString(err.Error())
	}
	if e.Omitted > 0 {
		fmt.Fprintf(&b, "\n  … and %d more", e.Omitted)
	}
	return b.String()
}

// Unwrap returns the listed refusals.
func (e *SourceErrors) Unwrap() []error { return e.Errs }

// Is reports ErrInvalidSource.
func (e *SourceErrors) Is(target error) bool { return target == ErrInvalidSource }

// joinSourceErrors flattens errs (nil entries skipped, nested *SourceErrors
// expanded) and bounds them: nil for none, the error itself for one.
func joinSourceErrors(errs []error) error {
	out := &SourceErrors{}
	var add func(err error)
	add = func(err error) {
		se, nested := err.(*SourceErrors)
		switch {
		case err == nil:
		case nested:
			for _, e := range se.Errs {
				add(e)
			}
			out.Omitted += se.Omitted
		case len(out.Errs) < MaxReported:
			out.Errs = append(out.Errs, err)
		default:
			out.Omitted++
		}
	}
	for _, err := range errs {
		add(err)
	}
	switch {
	case len(out.Errs) == 0:
		return nil
	case len(out.Errs) == 1 && out.Omitted == 0:
		return out.Errs[0]
	}
	return out
}
