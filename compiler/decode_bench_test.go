package compiler

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/configpub/configpub/internal/gen"
	"github.com/configpub/configpub/internal/render"
	"github.com/configpub/configpub/internal/yamlstrict"
)

// BenchmarkDecodeSpecs decodes the Agent and target documents of a
// generated 1,000-target repository into their specs, parsed once
// beforehand: render.Decode, as loading does, against the in-run baseline
// it replaced (the document's RFC 8785 text decoded by encoding/json), which
// does the same work.
func BenchmarkDecodeSpecs(b *testing.B) {
	var agents, targets []*render.Value
	for p, f := range gen.Repo(gen.Options{Targets: 1000}) {
		d, err := yamlstrict.Parse(p, f.Data)
		if err != nil {
			b.Fatal(err)
		}
		switch {
		case strings.HasPrefix(p, "agents/"):
			agents = append(agents, d.Value)
		case strings.HasPrefix(p, "targets/"):
			targets = append(targets, d.Value)
		}
	}
	b.Run("direct", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			decodeAll[agentSpec](b, agents, render.Decode)
			decodeAll[targetSpec](b, targets, render.Decode)
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*(len(agents)+len(targets))), "ns/doc")
	})
	b.Run("baseline-json", func(b *testing.B) {
		b.ReportAllocs()
		var buf []byte
		viaJSON := func(v *render.Value, dst any) error {
			var err error
			if buf, err = render.AppendCanonical(buf[:0], v); err != nil {
				return err
			}
			return json.Unmarshal(buf, dst)
		}
		for b.Loop() {
			decodeAll[agentSpec](b, agents, viaJSON)
			decodeAll[targetSpec](b, targets, viaJSON)
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*(len(agents)+len(targets))), "ns/doc")
	})
}

func decodeAll[T any](b *testing.B, docs []*render.Value, decode func(*render.Value, any) error) {
	for _, v := range docs {
		var d doc[T]
		if err := decode(v, &d); err != nil {
			b.Fatal(err)
		}
		if d.Metadata.Name == "" {
			b.Fatal("decoded no name")
		}
	}
}
