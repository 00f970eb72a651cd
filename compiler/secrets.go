package compiler

import (
	"github.com/configpub/configpub/internal/render"
	"github.com/configpub/configpub/internal/secretscan"
)

// SecretRefPrefix is the only accepted form of a credential value.
const SecretRefPrefix = secretscan.RefScheme

// checkSecrets refuses literal credentials anywhere in a document, in member
// names as in values (see internal/secretscan). Messages name the field and
// the rule, never the value.
func checkSecrets(src *source, v *render.Value, path []string) error {
	f := secretscan.Scan(v)
	if f == nil {
		return nil
	}
	where, at := "value", f.Path
	if f.InKey {
		// The member name is the secret: name its parent.
		where, at = "member name", f.Path[:len(f.Path)-1]
	}
	return src.errorf(append(path[:len(path):len(path)], at...), "literal secret (%s in a %s): a credential must be a secretRef (%s…); the value is not shown", f.Rule, where, SecretRefPrefix)
}
