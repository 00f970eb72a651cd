package main

import (
	"errors"

	"github.com/spf13/cobra"
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

// ranError marks an error a verb returned once it ran. Everything cobra
// refuses before a verb runs (an unknown command or flag, a bad flag value,
// the wrong number of arguments, a required flag not set) is not one, and
// so is a usage error.
type ranError struct{ err error }

func (e ranError) Error() string { return e.err.Error() }
func (e ranError) Unwrap() error { return e.err }

// markRan makes every verb of the tree return its errors as ranError.
func markRan(c *cobra.Command) {
	if run := c.RunE; run != nil {
		c.RunE = func(cmd *cobra.Command, args []string) error {
			if err := run(cmd, args); err != nil {
				return ranError{err}
			}
			return nil
		}
	}
	for _, sub := range c.Commands() {
		markRan(sub)
	}
}

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
	var ran ranError
	if !errors.As(err, &ran) {
		return exitUsage // refused by cobra before any verb ran
	}
	return exitRefused
}
