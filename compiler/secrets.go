package compiler

import (
	"regexp"
	"strings"

	"github.com/configpub/configpub/internal/render"
)

// SecretRefPrefix is the only accepted form of a credential value.
const SecretRefPrefix = "vault://"

// secretKeys are member names (lower-cased, "_" and "-" removed) whose
// values are credentials and so must be secretRefs.
var secretKeys = map[string]bool{
	"password": true, "passwd": true, "secret": true, "clientsecret": true, "apikey": true,
	"token": true, "accesstoken": true, "refreshtoken": true, "privatekey": true, "credential": true,
	"credentials": true, "credentialref": true, "secretref": true, "dsn": true,
}

// literalSecret matches values that are credentials whatever their key:
// PEM private keys, well-known API key shapes, URLs with an inline password.
var literalSecret = regexp.MustCompile(`-----BEGIN [A-Z ]*PRIVATE KEY-----|\bsk-[A-Za-z0-9_-]{16,}|\bAKIA[0-9A-Z]{16}\b|\bgh[pousr]_[A-Za-z0-9]{30,}|\bxox[baprs]-[A-Za-z0-9-]{10,}|://[^/\s:@]+:[^/\s@]+@`)

// checkSecrets refuses literal credentials anywhere in a document. Messages
// never include the value.
func checkSecrets(src *source, v *render.Value, path []string) error {
	switch v.Kind {
	case render.KindMap:
		for i, k := range v.Keys {
			p := append(path[:len(path):len(path)], k)
			child := v.Vals[i]
			if secretKeys[normalizeKey(k)] && child.Kind != render.KindNull {
				if child.Kind != render.KindString || !strings.HasPrefix(child.Str, SecretRefPrefix) || len(child.Str) == len(SecretRefPrefix) {
					return src.errorf(p, "literal secret: a credential must be a secretRef (%s…), the value is not shown", SecretRefPrefix)
				}
				continue
			}
			if err := checkSecrets(src, child, p); err != nil {
				return err
			}
		}
	case render.KindList:
		for i, it := range v.Items {
			if err := checkSecrets(src, it, append(path[:len(path):len(path)], "["+itoa(i)+"]")); err != nil {
				return err
			}
		}
	case render.KindString:
		if mayHoldSecret(v.Str) && literalSecret.MatchString(v.Str) {
			return src.errorf(path, "literal secret: value looks like a credential; use a secretRef (%s…), the value is not shown", SecretRefPrefix)
		}
	}
	return nil
}

// normalizeKey lower-cases k and drops "_" and "-".
func normalizeKey(k string) string {
	b := make([]byte, 0, len(k))
	for i := 0; i < len(k); i++ {
		c := k[i]
		switch {
		case c == '_' || c == '-':
		case c >= 'A' && c <= 'Z':
			b = append(b, c+'a'-'A')
		default:
			b = append(b, c)
		}
	}
	return string(b)
}

// mayHoldSecret is a cheap prefilter for literalSecret: every pattern needs
// one of these substrings.
func mayHoldSecret(s string) bool {
	return strings.Contains(s, "PRIVATE KEY") || strings.Contains(s, "sk-") || strings.Contains(s, "AKIA") ||
		strings.Contains(s, "gh") && (strings.Contains(s, "ghp_") || strings.Contains(s, "gho_") || strings.Contains(s, "ghu_") || strings.Contains(s, "ghs_") || strings.Contains(s, "ghr_")) || strings.Contains(s, "xox") || strings.Contains(s, "@")
}
