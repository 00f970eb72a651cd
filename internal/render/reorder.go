package render

// Reordered reports whether a and b are lists of the same items (equal as
// canonical JSON, each as many times) in another order: a list setting
// only reordered. Equal lists, and anything but two lists, are not.
func Reordered(a, b *Value) bool {
	if a == nil || b == nil || a.Kind != KindList || b.Kind != KindList || len(a.Items) != len(b.Items) || len(a.Items) < 2 {
		return false
	}
	count := make(map[string]int, len(a.Items))
	same := true
	for i := range a.Items {
		ca, err := Canonical(a.Items[i])
		if err != nil {
			return false
		}
		cb, err := Canonical(b.Items[i])
		if err != nil {
			return false
		}
		same = same && string(ca) == string(cb)
		count[string(ca)]++
		count[string(cb)]--
	}
	if same {
		return false
	}
	for _, n := range count {
		if n != 0 {
			return false
		}
	}
	return true
}
