// Package yamlstrict reads YAML documents into configpub's JSON-compatible
// value tree (internal/render) and refuses anything with no exact JSON
// equivalent or with surprising YAML semantics:
//
//   - duplicate keys, non-string keys, merge keys, anchors and aliases (so an
//     alias bomb is refused before any expansion), explicit tags other than
//     the YAML 1.2 core schema, !!binary;
//   - NaN, ±Inf, integers beyond ±2^53, integers that are not plain decimal
//     (010, 0o10, 0x1F: YAML 1.1 octal/hex surprises), floats whose written
//     form is not their JSON form (1.10 would silently become 1.1);
//   - unquoted YAML 1.1 booleans (y, yes, no, on, off, …) in free-form data;
//   - more than MaxDepth levels of nesting or more than MaxFileSize bytes.
//
// Every refusal is an *Error naming file, line and field path.
package yamlstrict
