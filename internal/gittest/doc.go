// Package gittest builds real go-git repositories for tests: in a temp dir,
// from a fixture folder or from in-memory files, with a fixed author, email
// and clock so that commit hashes are stable across runs and machines
// (except signed commits: OpenPGP keys are generated per test). It makes
// ordinary commits, branches, feature-branch commits, merge commits (first
// parent = the branch merged into) with trailers, and commits signed with an
// OpenPGP key generated in the test. Objects are written straight to the
// repository's object store; the worktree is only touched by Checkout.
package gittest
