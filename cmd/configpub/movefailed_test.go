package main

import (
	"errors"
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
