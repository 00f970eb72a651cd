package compiler

import (
	"strings"
	"unicode"

	"golang.org/x/text/unicode/norm"

	"github.com/configpub/configpub/bundle"
	"github.com/configpub/configpub/internal/render"
	"github.com/configpub/configpub/internal/safetext"
	"github.com/configpub/configpub/internal/yamlstrict"
)

// mergeSettings deep-merges override into base (compile step 5): maps
// merge, lists and scalars replace, an explicit null removes the key.
// Presence is kept distinct from empty, false and 0. Neither input is
// modified; unchanged subtrees are shared.
func mergeSettings(base, override *render.Value) *render.Value {
	if override == nil {
		if base == nil {
			return render.Map()
		}
		return base
	}
	if base == nil || base.Kind != render.KindMap || override.Kind != render.KindMap {
		return stripNulls(override)
	}
	out := &render.Value{Kind: render.KindMap, Keys: append([]string(nil), base.Keys...), Vals: append([]*render.Value(nil), base.Vals...)}
	for i, k := range override.Keys {
		ov := override.Vals[i]
		if ov.Kind == render.KindNull {
			out.Delete(k)
			continue
		}
		if bv := out.Get(k); bv != nil && bv.Kind == render.KindMap && ov.Kind == render.KindMap {
			out.Set(k, mergeSettings(bv, ov))
			continue
		}
		out.Set(k, stripNulls(ov))
	}
	return out
}

// stripNulls returns v without null map members (a null can only mean
// "absent"), copying only the maps that had one.
func stripNulls(v *render.Value) *render.Value {
	if v.Kind != render.KindMap {
		return v
	}
	changed := false
	vals := make([]*render.Value, len(v.Vals))
	for i, c := range v.Vals {
		vals[i] = stripNulls(c)
		if c.Kind == render.KindNull || vals[i] != c {
			changed = true
		}
	}
	if !changed {
		return v
	}
	out := render.Map()
	for i, k := range v.Keys {
		if v.Vals[i].Kind == render.KindNull {
			continue
		}
		out.Add(k, vals[i])
	}
	return out
}

// flatten turns merged settings into the flat property map of values.yml:
// nested map keys join with "."; lists, scalars and empty maps are leaves
// (shared, not copied). The result is sorted by key.
func flatten(v *render.Value) *render.Value {
	out := render.Map()
	var walk func(prefix string, v *render.Value)
	walk = func(prefix string, v *render.Value) {
		if v.Kind == render.KindMap && len(v.Keys) > 0 {
			for i, k := range v.Keys {
				walk(prefix+"."+k, v.Vals[i])
			}
			return
		}
		out.Add(prefix, v)
	}
	if v != nil && v.Kind == render.KindMap {
		for i, k := range v.Keys {
			walk(k, v.Vals[i])
		}
	}
	return out.SortKeys()
}

// reservedSettingKeys are the top-level members of values.yml that are not
// settings: the envelope and the policy namespaces.
var reservedSettingKeys = []string{
	"runtimePolicy",
	bundle.Namespace(bundle.AudienceAgent),
	bundle.Namespace(bundle.AudienceGateway),
	bundle.Namespace(bundle.AudienceKnowledge),
}

// foldSettingKey is how a case-insensitive consumer compares keys: Viper
// lower-cases them; Spring's relaxed binding and .NET's configuration binder
// also ignore "-" and "_".
func foldSettingKey(k string) string {
	for _, r := range k {
		if r == '-' || r == '_' || unicode.ToLower(r) != r {
			return strings.ToLower(strings.NewReplacer("-", "", "_", "").Replace(k))
		}
	}
	return k // already folded: the common case allocates nothing
}

// reservedSettingKey returns the reserved name k stands for in a consumer
// that ignores case, "-" and "_", or "".
func reservedSettingKey(k string) string {
	f := foldSettingKey(k)
	for _, r := range reservedSettingKeys {
		if f == strings.ToLower(r) {
			return r
		}
	}
	return ""
}

// checkSettingKeys refuses setting keys that would collide with the
// envelope or a namespace (ignoring case, "-" and "_": RuntimePolicy is
// runtimePolicy to Viper), that contain "." (ambiguous once flattened),
// that are not in Unicode NFC (an Environment's "café" and a Target's
// decomposed "café" would be two keys that look alike), or that are one
// key with another of the same mapping to such a runtime (Logging and
// logging: it would merge them, and one would silently override the other).
func checkSettingKeys(src *source, path []string, v *render.Value, top bool) error {
	if v == nil || v.Kind != render.KindMap {
		return nil
	}
	var folded map[string]int // fold of a key -> its index, for mappings of more than one key
	if len(v.Keys) > 1 {
		folded = make(map[string]int, len(v.Keys))
	}
	for i, k := range v.Keys {
		p := append(path[:len(path):len(path)], k)
		if folded != nil {
			f := foldSettingKey(k)
			if j, dup := folded[f]; dup {
				// Keys may be sorted: name the one written first in the
				// file first, and refuse at the later one.
				first, second := v.Keys[j], k
				fp, sp := append(path[:len(path):len(path)], first), p
				fl, sl := src.line(fp), src.line(sp)
				if sl < fl {
					first, second, sp, fl = second, first, fp, sl
				}
				return src.errorf(sp, "setting keys %q (line %d) and %q are one key to a runtime that ignores case, \"-\" and \"_\" (Viper, Spring, .NET): it would merge them and one would silently override the other; keep one spelling",
					first, fl, second)
			}
			folded[f] = i
		}
		if strings.Contains(k, ".") || k == "" {
			return src.errorf(p, "setting key %q must be non-empty and must not contain \".\"", k)
		}
		if !norm.NFC.IsNormalString(k) {
			return src.errorf(p, "setting key %+q is not in Unicode NFC (composed) form; write %+q: the two look alike, but an override of one would not reach the other", k, norm.NFC.String(k))
		}
		if r := reservedSettingKey(k); top && r == k {
			return src.errorf(p, "setting key %q is reserved", k)
		} else if top && r != "" {
			return src.errorf(p, "setting key %q is reserved: it is %q to a runtime that ignores case, \"-\" and \"_\" (Viper, Spring, .NET)", k, r)
		}
		if err := checkSettingKeys(src, p, v.Vals[i], false); err != nil {
			return err
		}
	}
	return nil
}

// checkOverrideSpelling refuses a key of the override settings (a Target's,
// over at overPath in over) that is a key of the base settings (the
// Environment's, at basePath in base) to a runtime that ignores case, "-"
// and "_", but spelled differently: mergeSettings would keep both, and the
// runtime would read one of them, whichever it met last. The merged key
// keeps the base's spelling, so an override must use it; maps present in
// both are checked at every level.
func checkOverrideSpelling(baseSrc *source, basePath []string, base *render.Value, overSrc *source, overPath []string, over *render.Value) error {
	if base == nil || over == nil || base.Kind != render.KindMap || over.Kind != render.KindMap {
		return nil
	}
	for i, k := range over.Keys {
		p := append(overPath[:len(overPath):len(overPath)], k)
		if bv := base.Get(k); bv != nil {
			if err := checkOverrideSpelling(baseSrc, append(basePath[:len(basePath):len(basePath)], k), bv, overSrc, p, over.Vals[i]); err != nil {
				return err
			}
			continue
		}
		f := foldSettingKey(k)
		for _, bk := range base.Keys {
			if foldSettingKey(bk) != f {
				continue
			}
			bp := append(basePath[:len(basePath):len(basePath)], bk)
			return overSrc.errorf(p, "setting key %q overrides %q of %s:%d (%s) spelled differently: a runtime that ignores case, \"-\" and \"_\" (Viper, Spring, .NET) reads them as one key, and values.yml would hold both; spell it %q",
				k, bk, safetext.Terminal(baseSrc.File), baseSrc.line(bp), yamlstrict.FieldPath(bp), bk)
		}
	}
	return nil
}
