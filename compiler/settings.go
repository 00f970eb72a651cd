package compiler

import (
	"strings"

	"golang.org/x/text/unicode/norm"

	"github.com/configpub/configpub/bundle"
	"github.com/configpub/configpub/internal/render"
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
	return strings.ToLower(strings.NewReplacer("-", "", "_", "").Replace(k))
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
// runtimePolicy to Viper), that contain "." (ambiguous once flattened), or
// that are not in Unicode NFC (an Environment's "café" and a Target's
// decomposed "café" would be two keys that look alike).
func checkSettingKeys(src *source, path []string, v *render.Value, top bool) error {
	if v == nil || v.Kind != render.KindMap {
		return nil
	}
	for i, k := range v.Keys {
		p := append(path[:len(path):len(path)], k)
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
