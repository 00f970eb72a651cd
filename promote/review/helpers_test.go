package review_test

import (
	"fmt"

	"github.com/configpub/configpub/internal/gittest"
)

func fingerprint(k *gittest.Key) string { return fmt.Sprintf("%x", k.Entity.PrimaryKey.Fingerprint) }
