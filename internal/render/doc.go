// Package render holds configpub's ordered value tree and its two
// serializations, both produced from the same values in one pass each:
//
//   - RFC 8785 (JSON Canonicalization Scheme) bytes, used for every semantic
//     digest (policyDigest, contentDigest, propertySetDigest, releaseDigest);
//   - the configpub-yaml/1 renderer profile, the exact values.yml bytes
//     (fixed key order as built, double-quoted strings, block style).
//
// Only values with a JSON equivalent can be represented: strings (valid
// UTF-8), booleans, null, integers within ±2^53 and finite floats.
package render
