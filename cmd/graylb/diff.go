package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
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
