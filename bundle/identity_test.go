package bundle

import (
	"errors"
	"strings"
	"testing"
)

func TestIdentityGrammar(t *testing.T) {
	long := func(n int, unit string) string { return strings.Repeat(unit, n) }
	label63 := long(63, "a")
	tests := []struct {
		field, value string
		ok           bool
		reason       string
	}{
		{"host", "dev.lightapi.net", true, ""},
		{"host", "localhost", true, ""},
		{"host", "a-b--c.example", true, ""},
		{"host", label63 + ".net", true, ""},
		{"host", long(80, "a"), false, "63"},
		{"host", strings.TrimSuffix(long(26, "abc."), ".") + "ab", false, "at most 80"},
		{"host", long(251, "a") + ".x", false, "at most 80"},
		{"host", "Dev.lightapi.net", false, "lowercase"},
		{"host", "dev.lightapi.net.", false, "must end"},
		{"host", "dev.lightapi.net-", false, "must end"},
		{"host", ".dev", false, "must start"},
		{"host", "dev..net", false, "between"},
		{"host", "dev_net", false, "not allowed"},
		{"host", "dev/net", false, "not allowed"},
		{"host", "dev net", false, "not allowed"},
		{"host", "", false, "empty"},
		{"serviceId", "com.networknt.agent-account-1.0.0", true, ""},
		{"serviceId", "a__b_c--d.e", true, ""},
		{"serviceId", "svc", true, ""},
		{"serviceId", long(80, "s"), true, ""},
		{"serviceId", long(81, "s"), false, "at most 80"},
		{"serviceId", "Com.networknt.agent", false, "lowercase"},
		{"serviceId", "com.networknt.agent-", false, "must end"},
		{"serviceId", "com.networknt.agent.", false, "must end"},
		{"serviceId", "-svc", false, "must start"},
		{"serviceId", "a___b", false, "between"},
		{"serviceId", "a._b", false, "between"},
		{"serviceId", "a..b", false, "between"},
		{"serviceId", "a:b", false, "not allowed"},
		{"serviceId", "a/b", false, "not allowed"},
		{"serviceId", "xäy", false, "not allowed"},
		{"envTag", "dev", true, ""},
		{"envTag", "prod-eu-1", true, ""},
		{"envTag", long(32, "e"), true, ""},
		{"envTag", long(33, "e"), false, "at most 32"},
		{"envTag", "Prod", false, "lowercase"},
		{"envTag", "prod-", false, "must end"},
		{"envTag", "prod.eu", false, "not allowed"},
		{"envTag", "prod_eu", false, "not allowed"},
		{"envTag", "", false, "empty"},
	}
	check := map[string]func(string) error{"host": CheckHost, "serviceId": CheckServiceID, "envTag": CheckEnvTag}
	for _, tt := range tests {
		err := check[tt.field](tt.value)
		if tt.ok {
			if err != nil {
				t.Errorf("%s %q: %v, want accepted", tt.field, tt.value, err)
			}
			continue
		}
		var ie *IdentityError
		if !errors.As(err, &ie) || ie.Field != tt.field || !strings.Contains(err.Error(), tt.reason) {
			t.Errorf("%s %q: got %v, want an IdentityError containing %q", tt.field, tt.value, err, tt.reason)
		}
	}
	// Every accepted identity at its maximum fits an OCI repository name
	// with the longest prefix the grammar leaves room for.
	path := long(MaxRepositoryPrefixLen, "p") + "/" + long(MaxEnvTagLen, "e") + "/" + strings.Repeat(label63+".", 1) + long(MaxHostLen-64, "h") + "/" + long(MaxServiceIDLen, "s")
	if len(path) != MaxRepositoryNameLen {
		t.Errorf("longest repository name %d, want %d", len(path), MaxRepositoryNameLen)
	}
	if err := (Identity{Host: label63 + "." + long(MaxHostLen-64, "h"), ServiceID: long(MaxServiceIDLen, "s"), EnvTag: long(MaxEnvTagLen, "e")}).Check(); err != nil {
		t.Errorf("longest identity refused: %v", err)
	}
}
