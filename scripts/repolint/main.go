// Command repolint checks over every Go module of the repository what the
// compiler and go vet do not (make lint runs it from the repository's
// root):
//
//   - no module imports a package under another module's internal
//     directory (internal.go);
//   - the names a doc comment refers to exist (docrefs.go);
//   - no doc comment is longer than 30 lines (doclen.go).
//
// Usage: go run ./scripts/repolint [root]. It prints one line per finding
// and exits 1 when there is one.
package main

import (
	"fmt"
	"os"
)

func main() {
	root := "."
	if len(os.Args) > 1 {
		root = os.Args[1]
	}
	r, err := loadRepo(root)
	if err != nil {
		fmt.Fprintln(os.Stderr, "repolint:", err)
		os.Exit(2)
	}
	var findings []string
	findings = append(findings, internalImports(r)...)
	findings = append(findings, docRefs(r)...)
	findings = append(findings, longDocs(r)...)
	for _, f := range findings {
		fmt.Println(f)
	}
	if len(findings) > 0 {
		fmt.Fprintf(os.Stderr, "repolint: %d findings\n", len(findings))
		os.Exit(1)
	}
}
