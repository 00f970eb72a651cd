package planreport

import (
	"fmt"
	"strings"
)

// maxDiffCells bounds the line-matching table of a unified diff; larger
// inputs are shown as every old line removed and every new line added.
const maxDiffCells = 4 << 20

// unifiedDiff returns a unified diff of two texts by lines, with context
// lines around each change ("" when they are equal).
func unifiedDiff(oldText, newText string, context int) string {
	if oldText == newText {
		return ""
	}
	a, b := splitLines(oldText), splitLines(newText)
	ops := lineOps(a, b)
	// Group the operations into hunks with context.
	type hunk struct{ start, end int }
	var hunks []hunk
	for i, op := range ops {
		if op.kind == ' ' {
			continue
		}
		s, e := max(0, i-context), min(len(ops), i+context+1)
		if n := len(hunks); n > 0 && s <= hunks[n-1].end {
			hunks[n-1].end = max(hunks[n-1].end, e)
			continue
		}
		hunks = append(hunks, hunk{s, e})
	}
	var sb strings.Builder
	sb.WriteString("--- old\n+++ new\n")
	for _, h := range hunks {
		ai, bi := ops[h.start].a, ops[h.start].b
		var an, bn int
		for _, op := range ops[h.start:h.end] {
			if op.kind != '+' {
				an++
			}
			if op.kind != '-' {
				bn++
			}
		}
		fmt.Fprintf(&sb, "@@ -%s +%s @@\n", hunkRange(ai, an), hunkRange(bi, bn))
		for _, op := range ops[h.start:h.end] {
			sb.WriteByte(op.kind)
			sb.WriteString(op.text)
			sb.WriteByte('\n')
		}
	}
	return sb.String()
}

func hunkRange(start, n int) string {
	if n == 0 {
		return fmt.Sprintf("%d,0", start)
	}
	if n == 1 {
		return fmt.Sprintf("%d", start+1)
	}
	return fmt.Sprintf("%d,%d", start+1, n)
}

func splitLines(s string) []string {
	s = strings.TrimSuffix(s, "\n")
	if s == "" {
		return nil
	}
	return strings.Split(s, "\n")
}

// op is one line of an edit script: ' ' kept, '-' removed, '+' added; a
// and b are the 0-based positions in the old and new text where it starts.
type op struct {
	kind byte
	text string
	a, b int
}

// lineOps is a longest-common-subsequence edit script of two line lists.
func lineOps(a, b []string) []op {
	var ops []op
	if len(a)*len(b) > maxDiffCells {
		for i, s := range a {
			ops = append(ops, op{'-', s, i, 0})
		}
		for j, s := range b {
			ops = append(ops, op{'+', s, len(a), j})
		}
		return ops
	}
	// lcs[i][j] is the LCS length of a[i:] and b[j:].
	w := len(b) + 1
	lcs := make([]int32, (len(a)+1)*w)
	for i := len(a) - 1; i >= 0; i-- {
		for j := len(b) - 1; j >= 0; j-- {
			if a[i] == b[j] {
				lcs[i*w+j] = lcs[(i+1)*w+j+1] + 1
			} else {
				lcs[i*w+j] = max(lcs[(i+1)*w+j], lcs[i*w+j+1])
			}
		}
	}
	i, j := 0, 0
	for i < len(a) || j < len(b) {
		switch {
		case i < len(a) && j < len(b) && a[i] == b[j]:
			ops = append(ops, op{' ', a[i], i, j})
			i, j = i+1, j+1
		case i < len(a) && (j == len(b) || lcs[(i+1)*w+j] >= lcs[i*w+j+1]):
			ops = append(ops, op{'-', a[i], i, j})
			i++
		default:
			ops = append(ops, op{'+', b[j], i, j})
			j++
		}
	}
	return ops
}
