// Package sidebyside renders a line-by-line, side-by-side comparison of two
// texts in the style of `diff --side-by-side`: each row shows the left line,
// a marker and the right line. Markers: ' ' equal, '|' changed, '<' only on
// the left, '>' only on the right.
package sidebyside

import (
	"io"
	"strings"
)

// Row is one output row.
type Row struct {
	Left, Right string
	Mark        byte
}

// Rows aligns the lines of a and b along a longest common subsequence;
// within a run of removed and added lines, pairs become changed rows.
func Rows(a, b []string) []Row {
	n, m := len(a), len(b)
	// lcs[i][j] = LCS length of a[i:], b[j:].
	lcs := make([][]int, n+1)
	for i := range lcs {
		lcs[i] = make([]int, m+1)
	}
	for i := n - 1; i >= 0; i-- {
		for j := m - 1; j >= 0; j-- {
			if a[i] == b[j] {
				lcs[i][j] = lcs[i+1][j+1] + 1
			} else {
				lcs[i][j] = max(lcs[i+1][j], lcs[i][j+1])
			}
		}
	}
	var rows []Row
	var dels, adds []string
	flush := func() {
		k := 0
		for ; k < len(dels) && k < len(adds); k++ {
			rows = append(rows, Row{Left: dels[k], Right: adds[k], Mark: '|'})
		}
		for _, l := range dels[k:] {
			rows = append(rows, Row{Left: l, Mark: '<'})
		}
		for _, r := range adds[k:] {
			rows = append(rows, Row{Right: r, Mark: '>'})
		}
		dels, adds = dels[:0], adds[:0]
	}
	i, j := 0, 0
	for i < n || j < m {
		switch {
		case i < n && j < m && a[i] == b[j]:
			flush()
			rows = append(rows, Row{Left: a[i], Right: b[j], Mark: ' '})
			i++
			j++
		case j < m && (i == n || lcs[i][j+1] >= lcs[i+1][j]):
			adds = append(adds, b[j])
			j++
		default:
			dels = append(dels, a[i])
			i++
		}
	}
	flush()
	return rows
}

// Lines splits text into lines without the final newline.
func Lines(text string) []string {
	if text == "" {
		return nil
	}
	return strings.Split(strings.TrimSuffix(text, "\n"), "\n")
}

// Write writes the rows of a and b, with the column headers leftTitle and
// rightTitle, the left column as wide as its longest line; trailing spaces
// are trimmed. It reports whether the texts differ.
func Write(w io.Writer, leftTitle, rightTitle string, a, b []string) (bool, error) {
	rows := Rows(a, b)
	width := len(leftTitle)
	for _, l := range a {
		width = max(width, len(l))
	}
	var sb strings.Builder
	line := func(l string, mark byte, r string) {
		sb.WriteString(strings.TrimRight(l+strings.Repeat(" ", width-len(l))+" "+string(mark)+" "+r, " "))
		sb.WriteByte('\n')
	}
	line(leftTitle, ' ', rightTitle)
	line(strings.Repeat("-", width), ' ', strings.Repeat("-", max(len(rightTitle), 1)))
	differ := false
	for _, r := range rows {
		if r.Mark != ' ' {
			differ = true
		}
		line(r.Left, r.Mark, r.Right)
	}
	_, err := io.WriteString(w, sb.String())
	return differ, err
}
