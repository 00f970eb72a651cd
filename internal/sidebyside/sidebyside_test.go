package sidebyside

import (
	"strings"
	"testing"
)

func TestWrite(t *testing.T) {
	var sb strings.Builder
	differ, err := Write(&sb, "old", "new", Lines("a\nb\nc\nd\n"), Lines("a\nB\nc\ne\nf\n"))
	if err != nil || !differ {
		t.Fatalf("differ %v, err %v", differ, err)
	}
	want := "old   new\n" +
		"---   ---\n" +
		"a     a\n" +
		"b   | B\n" +
		"c     c\n" +
		"d   | e\n" +
		"    > f\n"
	if sb.String() != want {
		t.Fatalf("got\n%s\nwant\n%s", sb.String(), want)
	}
	sb.Reset()
	if differ, _ := Write(&sb, "x", "y", Lines("same\n"), Lines("same\n")); differ {
		t.Fatal("equal texts reported as different")
	}
	rows := Rows([]string{"x", "y"}, nil)
	if len(rows) != 2 || rows[0].Mark != '<' || rows[1].Mark != '<' {
		t.Fatalf("only-left rows: %+v", rows)
	}
}
