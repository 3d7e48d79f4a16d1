package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/graylb/graylb"
)

// maxDiffLines bounds the line diff's work (it is quadratic): documents
// longer than this are compared as a whole.
const maxDiffLines = 2000

// diffDocs returns a line diff of two rule documents ("-" old, "+" new,
// " " common lines), each indented the same way first when it is JSON, so
// that only changes of content show. Empty when they are equal.
func diffDocs(old, new []byte) string {
	a, b := normalize(old), normalize(new)
	if a == b {
		return ""
	}
	al, bl := splitLines(a), splitLines(b)
	if len(al) > maxDiffLines || len(bl) > maxDiffLines {
		return fmt.Sprintf("- (%d lines)\n+ (%d lines)\n", len(al), len(bl))
	}
	return lineDiff(al, bl)
}

func normalize(doc []byte) string {
	var buf bytes.Buffer
	if len(bytes.TrimSpace(doc)) > 0 && json.Indent(&buf, bytes.TrimSpace(doc), "", "  ") == nil {
		return buf.String() + "\n"
	}
	return string(doc)
}

func splitLines(s string) []string {
	if s == "" {
		return nil
	}
	lines := strings.Split(strings.TrimSuffix(s, "\n"), "\n")
	for i := range lines {
		lines[i] += "\n"
	}
	return lines
}

// lineDiff is a longest-common-subsequence diff of two line lists.
func lineDiff(a, b []string) string {
	n, m := len(a), len(b)
	lcs := make([][]int32, n+1)
	for i := range lcs {
		lcs[i] = make([]int32, m+1)
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
	var out strings.Builder
	i, j := 0, 0
	for i < n || j < m {
		switch {
		case i < n && j < m && a[i] == b[j]:
			out.WriteString("  " + a[i])
			i, j = i+1, j+1
		case i < n && (j == m || lcs[i+1][j] >= lcs[i][j+1]):
			out.WriteString("- " + a[i])
			i++
		default:
			out.WriteString("+ " + b[j])
			j++
		}
	}
	return out.String()
}

// describeChange says, field by field, what changed from a to b in
// words an operator reads: "closed: false → true", "grayUsers: +u7 -u2".
// Empty when they are the same rules.
func describeChange(a, b graylb.Rules) string {
	var parts []string
	on := func(r graylb.Rules) bool { return r.Enabled == nil || *r.Enabled }
	if on(a) != on(b) {
		parts = append(parts, fmt.Sprintf("enabled: %t → %t", on(a), on(b)))
	}
	if a.Closed != b.Closed {
		parts = append(parts, fmt.Sprintf("closed: %t → %t", a.Closed, b.Closed))
	}
	if a.CanaryPercent != b.CanaryPercent {
		parts = append(parts, fmt.Sprintf("canaryPercent: %v → %v", a.CanaryPercent, b.CanaryPercent))
	}
	if a.ShadowPercent != b.ShadowPercent {
		parts = append(parts, fmt.Sprintf("shadowPercent: %v → %v", a.ShadowPercent, b.ShadowPercent))
	}
	for _, l := range []struct {
		name string
		a, b []string
	}{{"grayUsers", a.GrayUsers, b.GrayUsers}, {"grayAddresses", a.GrayAddresses, b.GrayAddresses}} {
		var d []string
		for _, v := range l.b {
			if !slices.Contains(l.a, v) {
				d = append(d, "+"+printable(v))
			}
		}
		for _, v := range l.a {
			if !slices.Contains(l.b, v) {
				d = append(d, "-"+printable(v))
			}
		}
		if len(d) > 10 {
			d = append(d[:10], fmt.Sprintf("and %d more", len(d)-10))
		}
		if len(d) == 0 && !slices.Equal(l.a, l.b) {
			d = append(d, "reordered")
		}
		if len(d) > 0 {
			parts = append(parts, l.name+": "+strings.Join(d, " "))
		}
	}
	ma, _ := json.Marshal(a.Matches)
	mb, _ := json.Marshal(b.Matches)
	if !bytes.Equal(ma, mb) {
		parts = append(parts, fmt.Sprintf("matches: %d rule(s) → %d rule(s), changed", len(a.Matches), len(b.Matches)))
	}
	if len(parts) == 0 && !sameRules(a, b) {
		parts = append(parts, "the document changed")
	}
	return strings.Join(parts, "; ")
}
