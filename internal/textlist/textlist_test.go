package textlist

import (
	"fmt"
	"testing"
)

func TestJoin(t *testing.T) {
	xs := make([]string, 0, 12)
	for i := range 12 {
		xs = append(xs, fmt.Sprint(i))
	}
	for _, c := range []struct {
		xs       []string
		total, n int
		want     string
	}{
		{nil, 0, 10, ""},
		{xs[:3], 3, 10, "0, 1, 2"},
		{xs[:10], 10, 10, "0, 1, 2, 3, 4, 5, 6, 7, 8, 9"},
		{xs, 12, 10, "0, 1, 2, 3, 4, 5, 6, 7, 8, 9 and 2 more"},
		{xs[:10], 150, 10, "0, 1, 2, 3, 4, 5, 6, 7, 8, 9 and 140 more"},
		{xs[:3], 5, 10, "0, 1, 2 and 2 more"},
		{xs[:4], 4, 3, "0, 1, 2 and 1 more"},
		{nil, 7, 5, "7 more"},
		{xs, 12, 0, "12 more"},
	} {
		if got := Join(c.xs, c.total, c.n); got != c.want {
			t.Errorf("Join(%d of %d, %d) = %q, want %q", len(c.xs), c.total, c.n, got, c.want)
		}
	}
}

func TestFirstKeepsNAndCountsAll(t *testing.T) {
	f := First{N: 3}
	for i := range 7 {
		f.Add(fmt.Sprint("t", i))
	}
	if f.Count != 7 || len(f.Items) != 3 || f.Items[2] != "t2" {
		t.Fatalf("%+v: want 7 counted and t0, t1, t2 kept", f)
	}
	if got, want := f.String(), "t0, t1, t2 and 4 more"; got != want {
		t.Fatalf("String() = %q, want %q", got, want)
	}
	var none First
	none.Add("x")
	if none.Count != 1 || len(none.Items) != 0 {
		t.Fatalf("%+v: N 0 keeps nothing and counts", none)
	}
}
