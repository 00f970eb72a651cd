// Command configpub-image writes the configpub container image, for one or
// more platforms, as an OCI layout directory, without a Docker daemon:
//
//	go run ./internal/imagebuild/cmd/configpub-image --out dist/image \
//	    --version v1.2.3 --commit $(git rev-parse HEAD) \
//	    linux/amd64=dist/configpub_linux_amd64 linux/arm64=dist/configpub_linux_arm64
//
// `crane push dist/image REF --index` (or `oras copy --from-oci-layout`)
// uploads it. The creation time is SOURCE_DATE_EPOCH when set (else the
// Unix epoch), so the same binaries give the same image digest.
package main

import (
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/configpub/configpub/internal/imagebuild"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "configpub-image:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	fs := flag.NewFlagSet("configpub-image", flag.ContinueOnError)
	out := fs.String("out", "", "OCI layout directory to create (required; must not exist)")
	version := fs.String("version", "devel", "version label")
	commit := fs.String("commit", "", "commit label (org.opencontainers.image.revision)")
	ca := fs.String("ca-certificates", "", "PEM bundle installed as /etc/ssl/certs/ca-certificates.crt")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *out == "" || fs.NArg() == 0 {
		return fmt.Errorf("usage: configpub-image --out DIR [--version V] [--commit C] OS/ARCH=BINARY (one or more)")
	}
	if _, err := os.Stat(*out); err == nil {
		return fmt.Errorf("--out %s already exists", *out)
	}
	opts := imagebuild.Options{Version: *version, Commit: *commit, CACertificates: *ca}
	if s := os.Getenv("SOURCE_DATE_EPOCH"); s != "" {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return fmt.Errorf("SOURCE_DATE_EPOCH %q: %w", s, err)
		}
		opts.Created = time.Unix(n, 0)
	}
	for _, a := range fs.Args() {
		plat, bin, ok := strings.Cut(a, "=")
		osName, arch, ok2 := strings.Cut(plat, "/")
		if !ok || !ok2 || bin == "" {
			return fmt.Errorf("%q: want OS/ARCH=BINARY", a)
		}
		opts.Platforms = append(opts.Platforms, imagebuild.Platform{OS: osName, Arch: arch, Binary: bin})
	}
	idx, err := imagebuild.Build(opts)
	if err != nil {
		return err
	}
	if err := imagebuild.WriteLayout(*out, idx); err != nil {
		return err
	}
	d, err := idx.Digest()
	if err != nil {
		return err
	}
	fmt.Printf("%s %s\n", *out, d)
	return nil
}
