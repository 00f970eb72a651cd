// Command publishgen publishes generated target artifacts (and a release
// artifact) to a registry with a cosign key, for scripts/compat.sh and
// benchmarks while no compiled fixtures are at hand. It writes each
// values.yml under --out and one line per artifact to --out/refs.txt:
// "<kind> <repository>@<digest> <envTag> <host> <serviceId> <file>".
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"

	"github.com/configpub/configpub/internal/registrytest"
	"github.com/configpub/configpub/internal/signing"
	"github.com/configpub/configpub/registry"
)

func main() {
	var (
		prefix    = flag.String("registry", "", "HOST[:PORT]/PREFIX")
		keyPath   = flag.String("key", "", "cosign.key (password in $COSIGN_PASSWORD)")
		out       = flag.String("out", "", "directory for values.yml files and refs.txt")
		n         = flag.Int("n", 5, "number of targets")
		env       = flag.String("env", "prod", "envTag")
		plainHTTP = flag.Bool("plain-http", false, "use http://")
	)
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, *prefix, *keyPath, *out, *env, *n, *plainHTTP); err != nil {
		fmt.Fprintln(os.Stderr, "publishgen:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, prefix, keyPath, out, env string, n int, plainHTTP bool) error {
	signer, err := signing.LoadPrivateKeyFile(keyPath, []byte(os.Getenv(signing.PasswordEnv)))
	if err != nil {
		return err
	}
	c, err := registry.New(registry.Options{PlainHTTP: plainHTTP})
	if err != nil {
		return err
	}
	arts := registrytest.Artifacts(n, env, 1)
	rel := &registry.Release{EnvTag: env, ReleaseVersion: 1, Manifest: []byte(`{"envTag":"` + env + `","releaseVersion":1}`), CreatedAt: registrytest.GeneratedCreatedAt}
	sum, err := c.Publish(ctx, registry.PublishRequest{Prefix: prefix, Artifacts: arts, Release: rel, Signer: signer})
	if err != nil {
		return err
	}
	refs, err := os.Create(filepath.Join(out, "refs.txt"))
	if err != nil {
		return err
	}
	defer refs.Close()
	for i, r := range sum.Results {
		if r.Kind == "release" {
			f := filepath.Join(out, env, "release.json")
			if err := writeFile(f, rel.Manifest); err != nil {
				return err
			}
			fmt.Fprintf(refs, "release %s %s - - %s\n", r.Ref(), env, f)
			continue
		}
		a := arts[i]
		f := filepath.Join(out, a.EnvTag, a.Host, a.ServiceID, "values.yml")
		if err := writeFile(f, a.Values); err != nil {
			return err
		}
		fmt.Fprintf(refs, "values %s %s %s %s %s\n", r.Ref(), a.EnvTag, a.Host, a.ServiceID, f)
	}
	fmt.Printf("published %d artifacts (%d pushed, %d already present, %d bytes)\n", len(sum.Results), sum.Pushed, sum.AlreadyPresent, sum.Bytes)
	return refs.Close()
}

func writeFile(path string, b []byte) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return os.WriteFile(path, b, 0o644)
}
