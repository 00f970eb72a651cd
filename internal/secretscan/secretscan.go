// Package secretscan finds literal credentials in policy documents: member
// names that hold credentials (matched case- and separator-insensitively),
// values shaped like credentials whatever their key (PEM private keys in any
// armour, also base64-encoded, raw DER private keys, JWTs, well-known token
// prefixes, Authorization header values, URL userinfo and credential query
// parameters), high-entropy strings in key-like fields, and reference fields
// whose value is not exactly a reference. Member names are checked like
// values: a secret used as a map key is found too.
//
// A Finding names the rule and where it matched, never the value.
package secretscan

import (
	"crypto/x509"
	"encoding/base64"
	"math"
	"regexp"
	"strings"

	"github.com/configpub/configpub/internal/render"
)

// RefScheme is the scheme of a secret reference: vault://PATH[#FIELD].
const RefScheme = "vault://"

// MaxRefLen bounds a reference.
const MaxRefLen = 512

// Finding is one literal credential: the member path where it was found
// and the rule that matched. It never holds the value.
type Finding struct {
	Path  []string // member names and "[i]" item indexes
	InKey bool     // the last member name itself is the credential
	Rule  string   // what matched, e.g. "JWT", "credential-named field"
}

// Scan walks v depth-first in document order and returns the first
// finding, or nil.
func Scan(v *render.Value) *Finding { return scan(v, make([]string, 0, 16)) }

func scan(v *render.Value, path []string) *Finding {
	// path is one stack for the whole walk (each level appends its member
	// and takes it off again); a finding gets its own copy.
	switch v.Kind {
	case render.KindMap:
		for i, k := range v.Keys {
			path = append(path, k)
			if rule := Value(k); rule != "" {
				return finding(path, rule, true)
			}
			if rule := Field(k, v.Vals[i]); rule != "" {
				return finding(path, rule, false)
			}
			if f := scan(v.Vals[i], path); f != nil {
				return f
			}
			path = path[:len(path)-1]
		}
	case render.KindList:
		for i, it := range v.Items {
			if f := scan(it, append(path, "["+itoa(i)+"]")); f != nil {
				return f
			}
		}
	case render.KindString:
		if rule := Value(v.Str); rule != "" {
			return finding(path, rule, false)
		}
	}
	return nil
}

func finding(path []string, rule string, inKey bool) *Finding {
	return &Finding{Path: append([]string(nil), path...), InKey: inKey, Rule: rule}
}

// RuleCredentialName is the rule of a Finding whose member name, not its
// value, marks it: a credential-named member holding anything but a
// reference, null or a boolean.
const RuleCredentialName = "credential-named field"

// Field checks the value of member name against what the name says it
// holds: a credential-named member must be exactly a vault:// reference, null
// or a boolean (which cannot hold a secret), a reference member (…Ref naming a secret or key) exactly a
// reference, and a key-like member no high-entropy string. It returns the
// rule that failed, or "". Value patterns are checked by Value.
func Field(name string, v *render.Value) string {
	n := Normalize(name)
	switch {
	case isRefName(n):
		if v.Kind == render.KindNull || (v.Kind == render.KindString && IsReference(v.Str, strings.HasSuffix(n, "keyref"))) {
			return ""
		}
		return "reference field that is not exactly a reference (" + RefScheme + "PATH)"
	case IsCredentialName(name):
		if v.Kind == render.KindNull || v.Kind == render.KindBool || (v.Kind == render.KindString && IsReference(v.Str, false)) {
			return ""
		}
		return RuleCredentialName
	case isKeyLikeName(n):
		if v.Kind == render.KindString && highEntropy(v.Str) {
			return "high-entropy value in a key-like field"
		}
	}
	return ""
}

// Normalize lower-cases name and drops everything but letters and digits,
// so dbPassword, db_password, DB-PASSWORD and "db password" compare equal.
func Normalize(name string) string {
	b := make([]byte, 0, len(name))
	for i := 0; i < len(name); i++ {
		c := name[i]
		switch {
		case c >= 'A' && c <= 'Z':
			b = append(b, c+'a'-'A')
		case c >= 'a' && c <= 'z', c >= '0' && c <= '9':
			b = append(b, c)
		}
	}
	return string(b)
}

// credentialSuffixes end the normalized name of a member that holds a
// credential.
var credentialSuffixes = []string{
	"password", "passwd", "passphrase", "pwd", "secret", "secretkey", "secretaccesskey", "clientsecret",
	"apikey", "apitoken", "accesskey", "accesskeyid", "privatekey", "token", "accesstoken", "refreshtoken",
	"idtoken", "authtoken", "bearertoken", "sessiontoken", "credential", "credentials", "authorization",
	"dsn", "connectionstring", "connstring", "cookie", "sessionkey", "signingkey", "encryptionkey", "masterkey",
	"webhooksecret", "sharedsecret", "hmackey",
}

// IsCredentialName reports whether a member name names a credential.
func IsCredentialName(name string) bool {
	n := Normalize(name)
	for _, s := range credentialSuffixes {
		if strings.HasSuffix(n, s) {
			return true
		}
	}
	return false
}

// isRefName: a reference to a secret or key (secretRef, credentialRef,
// signingKeyRef, keyRef, passwordRef).
func isRefName(n string) bool {
	stem, ok := strings.CutSuffix(n, "ref")
	if !ok || stem == "" {
		return false
	}
	return IsCredentialName(stem) || strings.HasSuffix(stem, "key")
}

// isKeyLikeName: names whose values are often secrets without saying so.
func isKeyLikeName(n string) bool {
	for _, s := range []string{"key", "auth", "sig", "signature", "salt", "hmac", "nonce", "session", "seed"} {
		if strings.HasSuffix(n, s) {
			return true
		}
	}
	return false
}

var refPath = regexp.MustCompile(`^[A-Za-z0-9._/:-]+(#[A-Za-z0-9._-]+)?$`)

// IsReference reports whether s is exactly a secret reference:
// vault://PATH[#FIELD] with nothing appended (no spaces, query, userinfo or
// "..") and, when allowHTTPS (public key references), an https URL without
// userinfo, query or fragment.
func IsReference(s string, allowHTTPS bool) bool {
	if len(s) > MaxRefLen {
		return false
	}
	if rest, ok := strings.CutPrefix(s, RefScheme); ok {
		return rest != "" && refPath.MatchString(rest) && !strings.Contains(rest, "..") && !strings.HasPrefix(rest, "/")
	}
	if allowHTTPS {
		return httpsRef.MatchString(s) && !strings.Contains(s, "..")
	}
	return false
}

var httpsRef = regexp.MustCompile(`^https://[A-Za-z0-9.-]+(:[0-9]{1,5})?(/[A-Za-z0-9._~/%-]*)?$`)

// valueRules match credentials whatever their key. A rule's regexp runs
// only when the lower-cased string contains one of its anchors (a cheap
// prefilter: most values match none).
var valueRules = []struct {
	name    string
	anchors []string // lower case
	re      *regexp.Regexp
}{
	{"PEM private key", []string{"private key"}, regexp.MustCompile(`(?i)-{2,}\s*BEGIN [A-Z0-9 _-]*PRIVATE KEY( BLOCK)?\s*-{2,}`)},
	{"PuTTY private key", []string{"putty-user-key-file"}, regexp.MustCompile(`PuTTY-User-Key-File-\d`)},
	{"JWT", []string{"eyj"}, regexp.MustCompile(`eyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{4,}\.[A-Za-z0-9_-]*`)},
	{"GitHub token", []string{"ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_"}, regexp.MustCompile(`\bgh[pousr]_[A-Za-z0-9]{30,}|\bgithub_pat_[A-Za-z0-9_]{22,}`)},
	{"GitLab token", []string{"glpat-", "glptt-", "gldt-"}, regexp.MustCompile(`\bgl(pat|ptt|dt)-[A-Za-z0-9_-]{20,}`)},
	{"Slack token", []string{"xox", "hooks.slack.com/services/"}, regexp.MustCompile(`\bxox[abposre]-[A-Za-z0-9-]{10,}|hooks\.slack\.com/services/T[A-Za-z0-9_/]+`)},
	{"AWS access key id", []string{"akia", "asia"}, regexp.MustCompile(`\b(AKIA|ASIA)[0-9A-Z]{16}\b`)},
	{"API secret key (sk-)", []string{"sk-", "sk_live_", "sk_test_", "rk_live_"}, regexp.MustCompile(`\bsk-[A-Za-z0-9_-]{20,}|\b[sr]k_(live|test)_[A-Za-z0-9]{16,}`)},
	{"Google API key", []string{"aiza"}, regexp.MustCompile(`\bAIza[0-9A-Za-z_-]{35}`)},
	{"Google OAuth token", []string{"ya29."}, regexp.MustCompile(`\bya29\.[0-9A-Za-z_-]{20,}`)},
	{"npm token", []string{"npm_"}, regexp.MustCompile(`\bnpm_[A-Za-z0-9]{36}`)},
	{"PyPI token", []string{"pypi-"}, regexp.MustCompile(`\bpypi-AgE[A-Za-z0-9_-]{50,}`)},
	{"Hugging Face token", []string{"hf_"}, regexp.MustCompile(`\bhf_[A-Za-z]{30,}`)},
	{"SendGrid key", []string{"sg."}, regexp.MustCompile(`\bSG\.[A-Za-z0-9_-]{16,}\.[A-Za-z0-9_-]{16,}`)},
	{"DigitalOcean token", []string{"dop_v1_", "doo_v1_"}, regexp.MustCompile(`\bdo[op]_v1_[a-f0-9]{64}`)},
	{"Authorization header", []string{"authorization"}, regexp.MustCompile(`(?i)\b(proxy-)?authorization\s*[:=]\s*\S{6,}`)},
	// An API-key header or assignment in text (a prompt, a note) whose
	// value is token-shaped: 16 or more token characters with a digit — a
	// placeholder (YOUR_API_KEY, ${API_KEY}, <key>) has none.
	{"API key header", []string{"api-key", "api_key", "apikey", "auth-token", "access-token", "access_token"},
		regexp.MustCompile(`(?i)\b(x-)?(api[-_]?key|auth-token|access[-_]token)["']?\s*[:=]\s*["']?(?:[0-9][A-Za-z0-9._~+/=-]{15,}|[A-Za-z._~+/=-]{1,24}[0-9][A-Za-z0-9._~+/=-]{14,})`)},
	{"URL userinfo password", []string{"://"}, regexp.MustCompile(`(?i)\b[a-z][a-z0-9+.-]*://[^/\s:@?#]*:[^/\s@?#]+@`)},
	{"credential query parameter", []string{"pass=", "passwd=", "password=", "pwd=", "token=", "key=", "secret=", "sig=", "signature=", "x-amz-", "auth=", "code="},
		regexp.MustCompile(`(?i)[?&;](password|passwd|pwd|pass|token|access_token|id_token|refresh_token|api[_-]?key|apikey|secret|client_secret|sig|signature|x-amz-signature|x-amz-credential|x-amz-security-token|auth|code)=[^&\s#$]`)},
}

var authScheme = regexp.MustCompile(`(?i)\b(bearer|basic)\s+([A-Za-z0-9._~+/-]+=*)`)

// Value returns the name of the rule a string (a value or a member name)
// matches as a literal credential, or "".
func Value(s string) string {
	if len(s) < 8 {
		return ""
	}
	lower := strings.ToLower(s)
	hits := ruleAnchors.find(lower)
	for i, r := range valueRules {
		if hits&(1<<i) != 0 && r.re.MatchString(s) {
			return r.name
		}
	}
	if hits&authSchemeBit != 0 {
		for _, m := range authScheme.FindAllStringSubmatch(s, 8) {
			if authCredential(strings.ToLower(m[1]), m[2]) {
				return "Authorization " + m[1] + " credential"
			}
		}
	}
	for _, run := range base64Runs(s, 40, 8) {
		if rule := encodedKey(run); rule != "" {
			return rule
		}
	}
	return ""
}

// base64Runs returns up to max runs of at least minLen base64 or base64url
// characters (with their "=" padding).
func base64Runs(s string, minLen, max int) []string {
	var out []string
	for i := 0; i < len(s) && len(out) < max; {
		j := i
		for j < len(s) && isBase64Char(s[j]) {
			j++
		}
		if j-i >= minLen {
			k := j
			for k < len(s) && k-j < 2 && s[k] == '=' {
				k++
			}
			out = append(out, s[i:k])
		}
		if j == i {
			j++
		}
		i = j
	}
	return out
}

func isBase64Char(c byte) bool {
	return c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '+' || c == '/' || c == '_' || c == '-'
}

// authCredential: a Basic credential decodes to user:password; a Bearer
// credential is long and not a plain word ("Bearer authentication").
func authCredential(scheme, cred string) bool {
	if scheme == "basic" {
		b, ok := decodeBase64(cred)
		return ok && strings.Contains(string(b), ":")
	}
	return len(cred) >= 16 && strings.ContainsAny(cred, "0123456789._-")
}

// encodedKey recognises a base64 run that decodes to PEM armour or to a DER
// private key.
func encodedKey(run string) string {
	b, ok := decodeBase64(run)
	if !ok {
		return ""
	}
	if strings.Contains(string(b), "PRIVATE KEY") || strings.Contains(string(b), "PuTTY-User-Key-File") {
		return "base64-encoded PEM private key"
	}
	if len(b) > 0 && b[0] == 0x30 {
		if _, err := x509.ParsePKCS8PrivateKey(b); err == nil {
			return "DER private key"
		}
		if _, err := x509.ParsePKCS1PrivateKey(b); err == nil {
			return "DER private key"
		}
		if _, err := x509.ParseECPrivateKey(b); err == nil {
			return "DER private key"
		}
	}
	return ""
}

func decodeBase64(s string) ([]byte, bool) {
	t := strings.TrimRight(s, "=")
	for _, enc := range []*base64.Encoding{base64.RawStdEncoding, base64.RawURLEncoding} {
		if b, err := enc.DecodeString(t); err == nil {
			return b, true
		}
	}
	// A run cut at an odd length: decode the longest prefix that is whole.
	t = t[:len(t)/4*4]
	for _, enc := range []*base64.Encoding{base64.RawStdEncoding, base64.RawURLEncoding} {
		if b, err := enc.DecodeString(t); err == nil {
			return b, true
		}
	}
	return nil, false
}

// highEntropy: one token shaped like a generated key: at least 32 hex
// digits, or at least 20 characters of base64/base62 mixing upper case, lower
// case and digits, with high Shannon entropy. Words joined by separators
// ("tenant-2024-region") and digests ("sha256:…") are not.
func highEntropy(s string) bool {
	if len(s) < 20 || len(s) > 4096 {
		return false
	}
	var upper, lower, digit, hexOnly = false, false, false, true
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= '0' && c <= '9':
			digit = true
		case c >= 'a' && c <= 'z':
			lower = true
			hexOnly = hexOnly && c <= 'f'
		case c >= 'A' && c <= 'Z':
			upper = true
			hexOnly = hexOnly && c <= 'F'
		case c == '+' || c == '/' || c == '=' || c == '_' || c == '-':
			hexOnly = false
		default:
			return false
		}
	}
	switch {
	case hexOnly && digit && len(s) >= 32:
		return entropy(s) >= 3.3
	case upper && lower && digit:
		return entropy(s) >= 3.8
	}
	return false
}

// entropy is the Shannon entropy of s in bits per byte.
func entropy(s string) float64 {
	var counts [256]int
	for i := 0; i < len(s); i++ {
		counts[s[i]]++
	}
	var h float64
	for _, c := range counts {
		if c > 0 {
			p := float64(c) / float64(len(s))
			h -= p * math.Log2(p)
		}
	}
	return h
}

// anchorIndex finds in one pass over a lower-cased string which rules'
// anchors it contains: bit i of the result is valueRules[i], authSchemeBit
// the Authorization schemes. It lists, by first byte, the anchors that
// start with it.
type anchorIndex [256][]anchor

type anchor struct {
	text string
	bit  uint64
}

// authSchemeBit marks "bearer" and "basic", which authScheme then reads.
const authSchemeBit = 1 << 63

// ruleAnchors is the index of valueRules' anchors and the schemes'.
var ruleAnchors = newAnchorIndex()

func newAnchorIndex() *anchorIndex {
	if len(valueRules) >= 63 {
		panic("secretscan: more value rules than anchor bits")
	}
	var x anchorIndex
	add := func(text string, bit uint64) {
		if len(text) < 2 || strings.ToLower(text) != text {
			panic("secretscan: anchor " + text + " is not two or more lower-case bytes")
		}
		x[text[0]] = append(x[text[0]], anchor{text, bit})
	}
	for i, r := range valueRules {
		for _, a := range r.anchors {
			add(a, 1<<i)
		}
	}
	add("bearer", authSchemeBit)
	add("basic", authSchemeBit)
	return &x
}

func (x *anchorIndex) find(lower string) uint64 {
	var hits uint64
	for i := 0; i+1 < len(lower); i++ {
		for _, a := range x[lower[i]] {
			// Every anchor has a second byte: most candidates end there.
			if a.text[1] == lower[i+1] && hits&a.bit == 0 && strings.HasPrefix(lower[i:], a.text) {
				hits |= a.bit
			}
		}
	}
	return hits
}

func itoa(i int) string {
	if i == 0 {
		return "0"
	}
	var b [20]byte
	n := len(b)
	for i > 0 {
		n--
		b[n] = byte('0' + i%10)
		i /= 10
	}
	return string(b[n:])
}
