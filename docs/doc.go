// Package docs holds configpub's user documentation (Markdown). Its tests
// keep the documentation true: reference.md is generated from the JSON
// Schemas (go test ./docs -run TestReference -update), and every example in
// authoring.md is compiled.
package docs
