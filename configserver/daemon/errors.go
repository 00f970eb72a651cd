package daemon

import "errors"

// ErrConfig marks an invalid Config (a usage error for the CLI).
var ErrConfig = errors.New("invalid config server configuration")
