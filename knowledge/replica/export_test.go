package replica

// Canonical exposes the package's RFC 8785 writer to the tests' snapshot
// builder (its output is held to the compiler's by TestStageGoldenSnapshot).
var Canonical = canonical
