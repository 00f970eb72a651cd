package compiler

import (
	"strings"

	"github.com/configpub/configpub/internal/render"
	"github.com/configpub/configpub/internal/secretscan"
)

// SecretRefPrefix is the only accepted form of a credential value.
const SecretRefPrefix = secretscan.RefScheme

// checkSecrets refuses literal credentials anywhere in a document, in member
// names as in values (see internal/secretscan). Messages name the field and
// the rule, never the value.
//
// unknown, when not nil, is asked about a credential-named member (the
// name, not the value, matched): when it says the schema has no such
// member, its message (which never quotes a value) is returned instead — a
// typo of maxOutputTokens is not a leaked token.
func checkSecrets(src *source, v *render.Value, path []string, unknown func(at []string) (string, bool)) error {
	f := secretscan.Scan(v)
	if f == nil {
		return nil
	}
	if unknown != nil && !f.InKey && f.Rule == secretscan.RuleCredentialName {
		at := make([]string, len(f.Path))
		for i, seg := range f.Path {
			at[i] = strings.TrimSuffix(strings.TrimPrefix(seg, "["), "]")
		}
		if msg, ok := unknown(at); ok {
			return src.errorf(append(path[:len(path):len(path)], f.Path...), "%s; the value is not shown", msg)
		}
	}
	where, at := "value", f.Path
	if f.InKey {
		// The member name is the secret: name its parent.
		where, at = "member name", f.Path[:len(f.Path)-1]
	}
	return src.errorf(append(path[:len(path):len(path)], at...), "literal secret (%s in a %s): a credential must be a secretRef (%s…); the value is not shown", f.Rule, where, SecretRefPrefix)
}
