package main

import (
	"fmt"
)

// maxDocLines is the most lines a doc comment may have.
const maxDocLines = 30

// longDocs reports every doc comment of a non-test file (of a package, a
// declaration or a struct field) longer than maxDocLines. A doc comment
// states what the caller may rely on, as net/http's RoundTripper does in
// about 20 lines; how it was measured, why it changed and how to use it go
// to docs/, where they cannot go stale beside code that moved.
func longDocs(r *repo) []string {
	var out []string
	for _, p := range r.pkgs {
		if p.test {
			continue
		}
		for i, f := range p.files {
			for _, g := range docComments(f) {
				start, end := r.fset.Position(g.Pos()).Line, r.fset.Position(g.End()).Line
				if n := end - start + 1; n > maxDocLines {
					out = append(out, fmt.Sprintf("%s:%d: a doc comment of %d lines, over %d: keep the contract, move the rest to docs/",
						p.paths[i], start, n, maxDocLines))
				}
			}
		}
	}
	return out
}
