package main

import (
	"testing"
)

// TestExitCodes checks that what cobra refuses before a verb runs is a
// usage error (exit 2), while a verb's own refusal is exit 1.
func TestExitCodes(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		want int
	}{
		{"unknown command", []string{"bogus"}, exitUsage},
		{"unknown flag", []string{"compile", "--bogus"}, exitUsage},
		{"unknown shorthand flag", []string{"compile", "-z"}, exitUsage},
		{"bad flag value", []string{"publish", "--concurrency", "many"}, exitUsage},
		{"unexpected argument", []string{"compile", "extra"}, exitUsage},
		{"missing argument", []string{"pull"}, exitUsage},
		{"required flag not set", []string{"fetch", "--server", "http://x"}, exitUsage},
		{"unknown subcommand argument", []string{"registry", "serve", "extra"}, exitUsage},
		{"verb refuses", []string{"compile", "--repo", t.TempDir(), "--env", "dev"}, exitRefused},
		{"verb reports a usage error itself", []string{"publish", "--repo", "r"}, exitUsage},
		{"readback concurrency out of range", []string{"readback", "--env", "prod", "--endpoint", "http://x", "--host", "h", "--service-id", "s", "--control-key", "k", "--concurrency", "0"}, exitUsage},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, err := runCLI(tc.args...)
			if got := exitCode(err); got != tc.want {
				t.Fatalf("%v: got exit %d (%v, output %q), want %d", tc.args, got, err, out, tc.want)
			}
		})
	}
}
