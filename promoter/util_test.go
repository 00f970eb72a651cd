package promoter_test

import (
	"strings"
	"time"
)

const minute = time.Minute

func containsStr(s, sub string) bool { return strings.Contains(s, sub) }
