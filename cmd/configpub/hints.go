package main

import (
	"crypto/tls"
	"errors"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/configpub/configpub/compiler"
	"github.com/configpub/configpub/internal/cosignkey"
)

// hintError adds what to do next to an error whose cause is a common
// mistake; it unwraps to the original error, so exit codes are unchanged.
type hintError struct {
	err  error
	hint string
}

func (e hintError) Error() string { return e.err.Error() + "\n  hint: " + e.hint }
func (e hintError) Unwrap() error { return e.err }

// explain recognises the mistakes a user can fix from the message alone.
func explain(err error) error {
	if err == nil {
		return nil
	}
	var h hintError
	if errors.As(err, &h) {
		return err
	}
	if errors.Is(err, cosignkey.ErrBadPrivateKey) && strings.Contains(err.Error(), "decrypt") {
		return hintError{err, "the password in " + cosignkey.PasswordEnv + " does not decrypt this key; set " + cosignkey.PasswordEnv + " to the password the key was created with"}
	}
	var rh tls.RecordHeaderError
	if errors.As(err, &rh) || strings.Contains(err.Error(), "first record does not look like a TLS handshake") ||
		strings.Contains(err.Error(), "server gave HTTP response to HTTPS client") {
		return hintError{err, "the registry answers plain HTTP, not HTTPS; add --plain-http"}
	}
	return err
}

// explainRepo adds to a verb's error that the --repo it was given is a
// repository around the policy directory (a monorepo's Git root) the
// --repo to pass instead, as given plus the subdirectory.
func explainRepo(cmd *cobra.Command, err error) error {
	var nested *compiler.NestedRepositoryError
	if err == nil || !errors.As(err, &nested) {
		return err
	}
	var h hintError
	if errors.As(err, &h) {
		return err
	}
	f := cmd.Flags().Lookup("repo")
	if f == nil {
		return err
	}
	repo := f.Value.String()
	if repo == "" {
		repo = "."
	}
	return hintError{err, "pass --repo " + filepath.Join(repo, filepath.FromSlash(nested.Dirs[0]))}
}

// withHints makes every verb of the tree pass its error through explain.
func withHints(c *cobra.Command) {
	if run := c.RunE; run != nil {
		c.RunE = func(cmd *cobra.Command, args []string) error { return explainRepo(cmd, explain(run(cmd, args))) }
	}
	for _, sub := range c.Commands() {
		withHints(sub)
	}
}
