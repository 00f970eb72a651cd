package main

import (
	"errors"
	"strings"
)

// Exit codes.
const (
	exitOK          = 0
	exitRefused     = 1 // a refusal the user can fix
	exitUsage       = 2 // bad flags or arguments
	exitUnconfirmed = 3 // outcome unknown: reconcile before retrying
	exitFailClosed  = 3 // a runtime has no valid configuration: it fails closed
)

// usageError marks errors in how configpub was called.
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }

// unconfirmedError marks outcomes that could not be confirmed (exit 3).
// Verbs wrap library sentinels such as promoter.ErrUnconfirmed with it.
type unconfirmedError struct{ err error }

func (e unconfirmedError) Error() string { return e.err.Error() }
func (e unconfirmedError) Unwrap() error { return e.err }

// failClosedError marks a runtime fetch that ended with no valid
// configuration (lease expired, or none ever verified): exit 3.
type failClosedError struct{ err error }

func (e failClosedError) Error() string { return e.err.Error() }
func (e failClosedError) Unwrap() error { return e.err }

// exitCode translates an error into the process exit code.
func exitCode(err error) int {
	if err == nil {
		return exitOK
	}
	var u usageError
	if errors.As(err, &u) {
		return exitUsage
	}
	var un unconfirmedError
	if errors.As(err, &un) {
		return exitUnconfirmed
	}
	var fc failClosedError
	if errors.As(err, &fc) {
		return exitFailClosed
	}
	if isCobraUsage(err) {
		return exitUsage
	}
	return exitRefused
}

// isCobraUsage recognises the argument errors cobra returns as plain errors.
func isCobraUsage(err error) bool {
	msg := err.Error()
	for _, p := range []string{"unknown command", "unknown flag", "unknown shorthand flag", "accepts ", "requires at least", "requires at most", "required flag", "invalid argument"} {
		if strings.Contains(msg, p) {
			return true
		}
	}
	return false
}
