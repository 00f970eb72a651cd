// Package benchsize picks a benchmark's size: the size its flag gives, or a
// small one when the benchmark runs under `go test -short` (make
// bench-smoke runs every benchmark once) and the flag was not given.
package benchsize

import (
	"flag"
	"testing"
)

// Flag returns *v, or small under `go test -short` unless the flag name was
// set on the command line: an explicit -args -name=... always wins.
func Flag[T any](name string, v *T, small T) T {
	if !testing.Short() || set(name) {
		return *v
	}
	return small
}

// set reports whether the flag name was set on the command line.
func set(name string) bool {
	found := false
	flag.Visit(func(f *flag.Flag) { found = found || f.Name == name })
	return found
}
