// Package docs compiles and runs the Go snippets of README.md and of the
// guides in this folder (docs/*.md); it holds nothing but tests.
//
// A snippet is a region of a _test.go file here, between
//
//	// snippet: <name>
//	...
//	// end snippet
//
// inside a test (or a function a test calls) that sets up what the snippet
// needs and then checks what it did. In the Markdown, the line just before
// a Go code block names its region:
//
//	<!-- snippet: <name> -->
//
// TestSnippets fails when a Go code block has no such line, when it differs
// from its region by a byte (the region less its first line's
// indentation), when a region is shown nowhere, or when a JSON code block
// is not a rules document graylb accepts. Edit the region, then rewrite
// the Markdown from it:
//
//	go test -run TestSnippets -update .    # in docs/
package docs
