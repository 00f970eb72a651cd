package compiler

import (
	"errors"
	"fmt"
	"strings"

	"github.com/configpub/configpub/internal/safetext"
	"github.com/configpub/configpub/internal/yamlstrict"
)

// Sentinel errors.
var (
	// ErrStale: the committed release manifest is not what the sources
	// compile to. The message names the first differing target.
	ErrStale = errors.New("release manifest is stale")
	// ErrInvalidSource is wrapped by every *SourceError.
	ErrInvalidSource = errors.New("invalid policy source")
	// ErrInvalidArtifact: a rendered artifact failed its audience schema or
	// digest rules.
	ErrInvalidArtifact = errors.New("invalid artifact")
	// ErrCreatedAtRequired: a new release is needed but Options.CreatedAt is
	// zero.
	ErrCreatedAtRequired = errors.New("createdAt is required for a new release")
	// ErrNotReproduced: compiling a release again (Result.EachTarget) gave
	// a target its manifest does not list as it is.
	ErrNotReproduced = errors.New("compiling the release again did not reproduce it")
)

// NestedRepositoryError: the directory compiled is not a policy
// repository's root (it has no configpub.yaml) but a subdirectory of it is
// one — a monorepo's Git root given where its policy/ directory was meant.
// It wraps ErrInvalidSource.
type NestedRepositoryError struct {
	// Dirs are the slash-separated subdirectories holding a configpub.yaml,
	// shallowest first, then in path order.
	Dirs []string
	// Releases reports whether Dirs[0] holds a releases/ directory.
	Releases bool
}

func (e *NestedRepositoryError) Error() string {
	d := safetext.Terminal(e.Dirs[0])
	holds := d + "/" + RepositoryFile
	if e.Releases {
		holds += " and " + d + "/" + ReleasesDir + "/"
	}
	msg := fmt.Sprintf("%v: no %s here, but %s/ holds a policy directory (%s): compile that directory, not the repository around it",
		ErrInvalidSource, RepositoryFile, d, holds)
	if len(e.Dirs) > 1 {
		others := make([]string, len(e.Dirs)-1)
		for i, o := range e.Dirs[1:] {
			others[i] = safetext.Terminal(o) + "/"
		}
		msg += fmt.Sprintf(" (also found: %s)", strings.Join(others, ", "))
	}
	return msg
}

// Is reports ErrInvalidSource.
func (e *NestedRepositoryError) Is(target error) bool { return target == ErrInvalidSource }

// SourceError is a refusal of policy input at file:line:field.
type SourceError struct {
	File  string
	Line  int
	Field string
	Err   error
}

func (e *SourceError) Error() string {
	// The file name and field path are shown escaped: a name holding a
	// newline would otherwise start a line of its own (a forged log line
	// or CI annotation).
	file := safetext.Terminal(e.File)
	if e.Field == "" {
		return fmt.Sprintf("%s:%d: %v", file, e.Line, e.Err)
	}
	return fmt.Sprintf("%s:%d: %s: %v", file, e.Line, safetext.Terminal(e.Field), e.Err)
}

// Unwrap returns the cause.
func (e *SourceError) Unwrap() error { return e.Err }

// Is reports ErrInvalidSource for every SourceError.
func (e *SourceError) Is(target error) bool { return target == ErrInvalidSource }

// fromStrict converts a yamlstrict refusal into a *SourceError.
func fromStrict(err error) error {
	var se *yamlstrict.Error
	if errors.As(err, &se) {
		return &SourceError{File: se.File, Line: se.Line, Field: se.Field, Err: errors.New(se.Msg)}
	}
	return err
}
