package main

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

// TestMoveErrorsNameTheirCommandOnce: an activate or rollback refusal
// names its command id once — the store's errors mostly name it already,
// and the command added it again ("… (command X): … (command X)").
func TestMoveErrorsNameTheirCommandOnce(t *testing.T) {
	f := moveFlags{commandID: "0d0b219a-f5f0-8f6c-aad6-b70bc7afdd65"}
	for _, err := range []error{
		errors.New("activate prod release 2 (command 0d0b219a-f5f0-8f6c-aad6-b70bc7afdd65): release 2 is not STAGED"),
		errors.New("open store: connection refused"),
	} {
		got := f.failed(err).Error()
		if n := strings.Count(got, f.commandID); n != 1 {
			t.Errorf("%q names the command %d times, want once", got, n)
		}
		if !strings.HasPrefix(got, err.Error()) {
			t.Errorf("%q does not keep the error %q", got, err)
		}
	}
	if err := (&moveFlags{}).failed(errors.New("x")); err.Error() != "x" {
		t.Errorf("without a command id: %q, want the error as it is", err)
	}
}

// TestMoveFlagsAreCheckedFirst: activate and rollback refuse a --release of
// 0 or less, a --command-id that is not a lowercase UUID and (activate) a
// --timeout of 0 or less as usage errors naming the flag, before the store
// is opened (the database here is not even listening). The store refused
// the first two, exit 1, naming a command id of its own; the store read
// the third as its default, 5m.
func TestMoveFlagsAreCheckedFirst(t *testing.T) {
	t.Setenv("COSIGN_PASSWORD", "")
	base := []string{"--env", "prod", "--reason", "r", "--actor", "a", "--key", "cosign.key", "--database", "postgres://configpub@127.0.0.1:1/none"}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"activate", "--release", "0"}, "--release 0: want a positive release version"},
		{[]string{"rollback", "--release", "-1"}, "--release -1: want a positive release version"},
		{[]string{"rollback", "--to-release", "-1"}, "--release -1: want a positive release version"},
		{[]string{"activate", "--release", "2", "--command-id", "notauuid"}, `--command-id "notauuid": want a lowercase UUID`},
		{[]string{"rollback", "--release", "1", "--command-id", "0D0B219A-F5F0-8F6C-AAD6-B70BC7AFDD65"}, `--command-id "0D0B219A-F5F0-8F6C-AAD6-B70BC7AFDD65": want a lowercase UUID`},
		{[]string{"activate", "--release", "2", "--timeout", "-1s"}, "--timeout -1s: must be positive"},
		{[]string{"activate", "--release", "2", "--timeout", "0s"}, "--timeout 0s: must be positive"},
	} {
		out, err := runCLI(append(tc.args, base...)...)
		if code := exitCode(err); code != exitUsage || !strings.Contains(fmt.Sprint(err), tc.want) {
			t.Errorf("%v: exit %d (%v), want 2 naming %q\n%s", tc.args, code, err, tc.want, out)
		}
	}
}
