package review

import "strings"

// Trailer is one "Key: value" line of a commit message's trailer block.
type Trailer struct {
	Key   string `json:"key"`
	Value string `json:"value"`
}

// ParseTrailers returns the trailers of a commit message the way
// git-interpret-trailers finds them: the last paragraph of the message (never
// the subject paragraph), in which every line is a "Token: value" trailer or
// a whitespace-indented continuation of one; a block that mixes in other
// lines still counts when at least a quarter of its lines are trailers and one
// of them is Signed-off-by. Keys keep their spelling; values are trimmed.
func ParseTrailers(message string) []Trailer {
	lines := strings.Split(strings.ReplaceAll(message, "\r\n", "\n"), "\n")
	for len(lines) > 0 && strings.TrimSpace(lines[len(lines)-1]) == "" {
		lines = lines[:len(lines)-1]
	}
	start := len(lines)
	for start > 0 && strings.TrimSpace(lines[start-1]) != "" {
		start--
	}
	if start == 0 { // only the subject paragraph
		return nil
	}
	block := lines[start:]
	var out []Trailer
	trailerLines, other, signedOff := 0, 0, false
	for _, line := range block {
		if (strings.HasPrefix(line, " ") || strings.HasPrefix(line, "\t")) && len(out) > 0 {
			out[len(out)-1].Value = strings.TrimSpace(out[len(out)-1].Value + " " + strings.TrimSpace(line))
			continue
		}
		key, value, ok := splitTrailer(line)
		if !ok {
			other++
			continue
		}
		trailerLines++
		if strings.EqualFold(key, "Signed-off-by") {
			signedOff = true
		}
		out = append(out, Trailer{Key: key, Value: value})
	}
	if trailerLines == 0 {
		return nil
	}
	if other > 0 && !(signedOff && trailerLines*4 >= trailerLines+other) {
		return nil
	}
	return out
}

// splitTrailer splits "Token: value"; the token is letters, digits and '-'.
func splitTrailer(line string) (key, value string, ok bool) {
	key, value, found := strings.Cut(line, ":")
	if !found || key == "" {
		return "", "", false
	}
	for _, r := range key {
		if !(r == '-' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z') {
			return "", "", false
		}
	}
	return key, strings.TrimSpace(value), true
}

// TrailerValues returns the non-empty values of the trailers named name
// (case-insensitive), in message order.
func TrailerValues(trailers []Trailer, name string) []string {
	var out []string
	for _, t := range trailers {
		if strings.EqualFold(t.Key, name) && t.Value != "" {
			out = append(out, t.Value)
		}
	}
	return out
}
