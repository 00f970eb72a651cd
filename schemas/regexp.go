package schemas

import (
	"regexp"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/configpub/configpub/internal/digest"
)

// Hand-written matchers for the patterns every artifact checks many times
// (digests, UUIDs, timestamps, names, semantic versions, durations). They
// are exact equivalents of the regular expressions in common.json, which
// stay the documented contract; any other pattern uses package regexp.
var fastPatterns = map[string]func(string) bool{
	`^sha256:[0-9a-f]{64}$`: digest.Valid,
	`^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`: func(s string) bool {
		if len(s) != 36 {
			return false
		}
		for i := 0; i < 36; i++ {
			if i == 8 || i == 13 || i == 18 || i == 23 {
				if s[i] != '-' {
					return false
				}
			} else if !isLowerHex(s[i]) {
				return false
			}
		}
		return true
	},
	`^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}Z$`: func(s string) bool {
		const layout = "dddd-dd-ddTdd:dd:ddZ"
		if len(s) != len(layout) {
			return false
		}
		for i := 0; i < len(s); i++ {
			if layout[i] == 'd' {
				if s[i] < '0' || s[i] > '9' {
					return false
				}
			} else if s[i] != layout[i] {
				return false
			}
		}
		return true
	},
	`^[a-z0-9]([a-z0-9.-]{0,126}[a-z0-9])?$`: func(s string) bool {
		if len(s) == 0 || len(s) > 128 {
			return false
		}
		for i := 0; i < len(s); i++ {
			c := s[i]
			alnum := c >= 'a' && c <= 'z' || c >= '0' && c <= '9'
			if !alnum && ((c != '.' && c != '-') || i == 0 || i == len(s)-1) {
				return false
			}
		}
		return true
	},
	`^(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)$`: func(s string) bool {
		parts := 0
		start := 0
		for i := 0; i <= len(s); i++ {
			if i < len(s) && s[i] != '.' {
				if s[i] < '0' || s[i] > '9' {
					return false
				}
				continue
			}
			seg := s[start:i]
			if len(seg) == 0 || (len(seg) > 1 && seg[0] == '0') {
				return false
			}
			parts++
			start = i + 1
		}
		return parts == 3
	},
	`^([0-9]+(ns|us|ms|s|m|h))+$`: func(s string) bool {
		if s == "" {
			return false
		}
		for i := 0; i < len(s); {
			j := i
			for j < len(s) && s[j] >= '0' && s[j] <= '9' {
				j++
			}
			if j == i || j == len(s) {
				return false
			}
			switch {
			case j+1 < len(s) && (s[j:j+2] == "ns" || s[j:j+2] == "us" || s[j:j+2] == "ms"):
				i = j + 2
			case s[j] == 's' || s[j] == 'm' || s[j] == 'h':
				i = j + 1
			default:
				return false
			}
		}
		return true
	},
}

func isLowerHex(c byte) bool { return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' }

type fastRegexp struct {
	pattern string
	match   func(string) bool
}

func (f fastRegexp) MatchString(s string) bool { return f.match(s) }
func (f fastRegexp) String() string            { return f.pattern }

// regexpEngine compiles schema patterns, using a fast matcher when one is
// known.
func regexpEngine(pattern string) (jsonschema.Regexp, error) {
	if m, ok := fastPatterns[pattern]; ok {
		return fastRegexp{pattern: pattern, match: m}, nil
	}
	return regexp.Compile(pattern)
}
