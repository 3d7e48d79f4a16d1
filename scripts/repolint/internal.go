package main

import (
	"fmt"
	"strconv"
	"strings"
)

// internalImports reports every import of a package under another
// module's internal directory. The go command allows one between modules
// whose paths nest (github.com/graylb/graylb/nacos may import
// github.com/graylb/graylb/internal/...), but it ties the importing
// module to the exact code of the other's internals: a release of one
// could no longer be used with another release of the other. What a
// nested module needs of the root module goes through an exported
// package (package adapter, for integrators).
func internalImports(r *repo) []string {
	var out []string
	for _, p := range r.pkgs {
		for i, f := range p.files {
			for _, imp := range f.Imports {
				path, err := strconv.Unquote(imp.Path.Value)
				if err != nil {
					continue
				}
				owner := r.moduleOwning(path)
				if owner == "" || owner == p.module {
					continue
				}
				if rest := strings.TrimPrefix(path, owner); hasInternal(rest) {
					out = append(out, fmt.Sprintf("%s:%d: module %s imports %s, under module %s's internal directory",
						p.paths[i], r.fset.Position(imp.Pos()).Line, p.module, path, owner))
				}
			}
		}
	}
	return out
}

// hasInternal reports whether a slash-separated path has an element
// "internal".
func hasInternal(p string) bool {
	for _, e := range strings.Split(p, "/") {
		if e == "internal" {
			return true
		}
	}
	return false
}
