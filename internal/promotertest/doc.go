// Package promotertest holds the test helpers shared by the tests of
// package promote (the pipeline) and package promoter (the store): a
// reviewed policy repository with two releases, a harness of a real
// database, registry and cosign key, a reader of what the store holds, and
// a configpub process that can be killed at a marked moment. Test code
// only.
package promotertest
