package bundle

import (
	"fmt"
	"strings"
)

// Identity grammar. A runtime identity (host, serviceId, envTag) names the
// OCI repository <prefix>/<envTag>/<host>/<serviceId> its artifacts are
// pushed to (tag r<releaseVersion>), so each part must be a valid OCI
// repository path component — lowercase letters and digits, separated by
// one '.', one '_', two '_' or a run of '-', never leading or trailing — and
// together they must leave room for the registry and prefix within the 255
// characters a repository name may have.
const (
	// MaxEnvTagLen is the longest envTag.
	MaxEnvTagLen = 32
	// MaxHostLen is the longest host; a host is also a DNS name (labels of
	// at most 63 characters).
	MaxHostLen = 80
	// MaxServiceIDLen is the longest serviceId.
	MaxServiceIDLen = 80
	// MaxRepositoryNameLen is the longest OCI repository name, registry
	// host included.
	MaxRepositoryNameLen = 255
	// MaxRepositoryPrefixLen is the longest "registry[:port][/path]" prefix
	// that still fits every identity: MaxRepositoryNameLen less the three
	// identity parts at their maximum and their three separators.
	MaxRepositoryPrefixLen = MaxRepositoryNameLen - MaxEnvTagLen - MaxHostLen - MaxServiceIDLen - 3
)

// IdentityError reports an identity part that does not follow the grammar.
type IdentityError struct {
	Field  string // "host", "serviceId" or "envTag"
	Value  string
	Reason string
}

func (e *IdentityError) Error() string {
	return fmt.Sprintf("%s %q: %s", e.Field, e.Value, e.Reason)
}

// CheckEnvTag checks an envTag: lowercase letters and digits in groups
// joined by single '-', at most MaxEnvTagLen characters.
func CheckEnvTag(s string) error {
	return checkPart("envTag", s, MaxEnvTagLen, "-")
}

// CheckHost checks a host: lowercase DNS labels (letters, digits, inner
// '-') joined by '.', each at most 63 characters, at most MaxHostLen in all.
func CheckHost(s string) error {
	if err := checkPart("host", s, MaxHostLen, ".-"); err != nil {
		return err
	}
	for _, l := range strings.Split(s, ".") {
		if len(l) > 63 {
			return &IdentityError{Field: "host", Value: s, Reason: fmt.Sprintf("DNS label %q is longer than 63 characters", l)}
		}
	}
	return nil
}

// CheckServiceID checks a serviceId: an OCI repository path component
// (lowercase letters and digits separated by '.', '_', '__' or a run of
// '-'), at most MaxServiceIDLen characters.
func CheckServiceID(s string) error {
	return checkPart("serviceId", s, MaxServiceIDLen, "._-")
}

// Check checks all three parts of the identity.
func (id Identity) Check() error {
	if err := CheckHost(id.Host); err != nil {
		return err
	}
	if err := CheckServiceID(id.ServiceID); err != nil {
		return err
	}
	return CheckEnvTag(id.EnvTag)
}

// checkPart checks s against the OCI path-component grammar
// [a-z0-9]+((\.|_|__|-+)[a-z0-9]+)* restricted to the separators in seps.
func checkPart(field, s string, max int, seps string) error {
	fail := func(format string, args ...any) error {
		v := s
		if len(v) > 2*max {
			v = v[:2*max] + "…"
		}
		return &IdentityError{Field: field, Value: v, Reason: fmt.Sprintf(format, args...)}
	}
	if s == "" {
		return fail("empty")
	}
	if len(s) > max {
		return fail("%d characters, at most %d", len(s), max)
	}
	alnum := func(c byte) bool { return c >= 'a' && c <= 'z' || c >= '0' && c <= '9' }
	if !alnum(s[0]) {
		return fail("must start with a lowercase letter or digit")
	}
	if !alnum(s[len(s)-1]) {
		return fail("must end with a lowercase letter or digit")
	}
	for i := 0; i < len(s); {
		c := s[i]
		if alnum(c) {
			i++
			continue
		}
		if c >= 'A' && c <= 'Z' {
			return fail("must be lowercase")
		}
		if !strings.ContainsRune(seps, rune(c)) {
			return fail("character %q is not allowed (letters, digits and %s)", c, quoteSeps(seps))
		}
		// A separator run: '.', '_', '__' or one or more '-'.
		j := i + 1
		for j < len(s) && s[j] == c && c == '-' {
			j++
		}
		if c == '_' && j < len(s) && s[j] == '_' {
			j++
		}
		if !alnum(s[j]) {
			return fail("separators %q must stand between letters or digits", s[i:j+1])
		}
		i = j
	}
	return nil
}

func quoteSeps(seps string) string {
	q := make([]string, len(seps))
	for i := range seps {
		q[i] = fmt.Sprintf("%q", seps[i])
	}
	return strings.Join(q, ", ")
}
