// Package review decides whether a Git commit may be promoted:
// the commit must lie on the first-parent history of a protected ref (the
// merges that landed on the branch, never a commit that only exists on a
// feature branch or as the second parent of a merge), and it must meet every
// configured requirement — an OpenPGP signature by a key in a trusted keyring
// (RFC 4880 / RFC 9580 detached signatures as Git stores them in the gpgsig
// header) and review trailers in the commit message (the git-interpret-trailers
// format: "Token: value" lines in the last paragraph).
//
// CommitFS exposes the reviewed commit's tree as an fs.FS (through
// internal/gitfs), so the compiler runs at that commit without a checkout.
//
// Everything here reads a go-git repository; nothing writes to it.
package review
