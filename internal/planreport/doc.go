// Package planreport turns a compiler.Plan into what a reviewer reads: for
// every changed target the old and new value of each changed path (long
// strings as a unified diff), the source file:line that changed it, why a
// dependent target changed ("changed because Agent X changed"), added and
// retired targets, and the digests folded away. It renders text, JSON and a
// pull-request comment (Markdown, one per environment, found again by a
// hidden marker).
package planreport
