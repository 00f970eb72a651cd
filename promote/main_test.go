package promote_test

import (
	"testing"

	"github.com/configpub/configpub/internal/pgtest"
)

// TestMain stops the private PostgreSQL cluster the tests started.
func TestMain(m *testing.M) { pgtest.Main(m) }
