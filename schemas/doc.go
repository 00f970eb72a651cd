// Package schemas embeds configpub's JSON Schema (draft 2020-12) documents
// and projection allowlists:
//
//   - source/<kind>.json: one schema per policy source kind;
//   - artifact/<audience>.json: each delivered values.yml, including the
//     runtimePolicy envelope (artifact/envelope.json). The Agent schema is
//     the machine-checked list of mandatory Agent properties;
//   - allowlist/<audience>.json: the compile-time projection allowlist of
//     each audience (JSON-pointer patterns, "*" matches any member or item)
//     and the member names that must never reach that audience.
//
// Schemas are validated with github.com/santhosh-tekuri/jsonschema/v6.
package schemas
