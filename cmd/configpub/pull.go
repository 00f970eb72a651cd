package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"
	orasregistry "oras.land/oras-go/v2/registry"

	"github.com/configpub/configpub/internal/atomicfile"
	"github.com/configpub/configpub/registry"
)

// registryFlags are the flags every verb that talks to a registry has.
type registryFlags struct {
	plainHTTP   bool
	concurrency int
}

func (f *registryFlags) add(cmd *cobra.Command) {
	cmd.Flags().BoolVar(&f.plainHTTP, "plain-http", false, "use http:// instead of https:// (loopback and test registries)")
}

// client builds a registry client; credentials come from the Docker config
// file, as oras and cosign read them.
func (f *registryFlags) client() (*registry.Client, error) {
	return registry.New(registry.Options{PlainHTTP: f.plainHTTP, Concurrency: f.concurrency})
}

func addPullCmd(root *cobra.Command) {
	var (
		rf  registryFlags
		out string
	)
	cmd := &cobra.Command{
		Use:   "pull REF@DIGEST --out FILE",
		Short: "Pull an artifact's layer by digest (digest-checked) into FILE",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if _, _, err := registry.ParseRef(args[0]); err != nil {
				return usageError{err}
			}
			if err := checkOutFile(out, "pull"); err != nil {
				return usageError{err}
			}
			c, err := rf.client()
			if err != nil {
				return err
			}
			p, err := c.Pull(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			if err := atomicfile.Write(out, p.Content, 0o644); err != nil {
				return err
			}
			rep := pullReport{Ref: p.Ref(), LayerDigest: p.Layer.Digest.String(), Bytes: len(p.Content), Out: out}
			return report(cmd, rep, func(w io.Writer) error {
				_, err := fmt.Fprintf(w, "pulled %s (%s, %d bytes) to %s\n", rep.Ref, rep.LayerDigest, rep.Bytes, rep.Out)
				return err
			})
		},
	}
	rf.add(cmd)
	outputFlag(cmd)
	cmd.Flags().StringVar(&out, "out", "", "file to write the layer to (required)")
	_ = cmd.MarkFlagRequired("out")
	root.AddCommand(cmd)
}

// pullReport is what pull prints with --output json.
type pullReport struct {
	Ref         string `json:"ref"`         // REPOSITORY@sha256:<hex>, as pulled
	LayerDigest string `json:"layerDigest"` // digest the layer was checked against
	Bytes       int    `json:"bytes"`       // layer size written
	Out         string `json:"out"`         // the file written
}

// checkOutFile refuses an --out that verb cannot write, before anything is
// fetched: one in a directory that does not exist (verb does not create
// it), or a directory itself.
func checkOutFile(out, verb string) error {
	dir := filepath.Dir(out)
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		return fmt.Errorf("--out %s: directory %s does not exist (%s does not create it)", out, dir, verb)
	}
	if fi, err := os.Stat(out); err == nil && fi.IsDir() {
		return fmt.Errorf("--out %s is a directory: give the file to write, e.g. %s", out, filepath.Join(out, "values.yml"))
	}
	return nil
}

// checkRegistryPrefix refuses a --registry prefix (HOST[:PORT][/PREFIX])
// that no artifact reference can be made under, before anything is
// compiled, pushed or read. One with credentials is not repeated: they
// come from the Docker config, never the flag.
func checkRegistryPrefix(prefix string) error {
	const want = "want HOST[:PORT]/PREFIX"
	switch {
	case strings.Contains(prefix, "@"):
		return fmt.Errorf("--registry (not repeated: it holds an '@'): %s, without credentials (they come from the Docker config) or a digest", want)
	case strings.Contains(prefix, "://"):
		return fmt.Errorf("--registry %q: %s without a scheme (use --plain-http for http)", prefix, want)
	}
	if _, err := orasregistry.ParseReference(strings.TrimSuffix(prefix, "/") + "/env/release"); err != nil {
		return fmt.Errorf("--registry %q: %s: %w", prefix, want, err)
	}
	return nil
}
