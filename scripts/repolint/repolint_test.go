package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// writeRepo writes files (path: content) under a temporary directory and
// loads it.
func writeRepo(t *testing.T, files map[string]string) *repo {
	t.Helper()
	root := t.TempDir()
	for name, content := range files {
		p := filepath.Join(root, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	r, err := loadRepo(root)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// A module may import its own internal packages, not another module's,
// however their paths nest; testdata is not looked at.
func TestInternalImports(t *testing.T) {
	r := writeRepo(t, map[string]string{
		"go.mod":                  "module example.com/m\n",
		"internal/x/x.go":         "package x\n",
		"a.go":                    "package m\n\nimport _ \"example.com/m/internal/x\"\n",
		"sub/go.mod":              "module example.com/m/sub\n",
		"sub/s.go":                "package sub\n\nimport _ \"example.com/m/internal/x\"\n",
		"sub/s_test.go":           "package sub\n\nimport _ \"example.com/m/internal/x\"\n",
		"sub/internal/y/y.go":     "package y\n",
		"sub/t.go":                "package sub\n\nimport _ \"example.com/m/sub/internal/y\"\n",
		"sub/testdata/z/z.go":     "package z\n\nimport _ \"example.com/m/internal/x\"\n",
		"other/go.mod":            "module example.com/other\n",
		"other/o.go":              "package other\n\nimport _ \"example.com/m/sub/internal/y\"\n",
		"other/internal/w/w.go":   "package w\n",
		"other/internal/w/w2.go":  "package w\n\nimport _ \"example.com/other/internal/w/v\"\n",
		"other/internal/w/v/v.go": "package v\n",
	})
	got := internalImports(r)
	want := []string{"other/o.go:3: ", "sub/s.go:3: ", "sub/s_test.go:3: "}
	if len(got) != len(want) {
		t.Fatalf("findings:\n%s", strings.Join(got, "\n"))
	}
	for i, w := range want {
		if !strings.HasPrefix(got[i], w) {
			t.Errorf("finding %d: %s, want %s...", i, got[i], w)
		}
	}
}

// What a doc comment names is checked where it can be told from prose.
func TestDocRefs(t *testing.T) {
	r := writeRepo(t, map[string]string{
		"go.mod": "module example.com/m\n",
		"adapter/adapter.go": `package adapter

// Balancer balances.
type Balancer struct{ Keys []string }

// Pass passes.
func (b *Balancer) Pass() {}
`,
		"engine/engine.go": `package engine

import "example.com/m/adapter"

// B is adapter's Balancer under another name.
type B = adapter.Balancer

// Cache caches. See WithShrinkProtection and Cache.Stats, [Cache.Len],
// ` + "`B.Pass`" + `, ` + "`adapter.Balancer.Keys`" + `, package adapter's Balancer.Pass,
// see below, see the doc, [a link](https://example.com), and
//
//	WithSettle(1) // code, not checked
//
//   - a list item names nothing: see Gone
type Cache struct{ n int }

// Stats counts; see ` + "`decide()`" + ` and see routeWith.
func (c *Cache) Stats() int { return c.n }

// Len is [Cache.Missing]; see WithSettle, ` + "`B.Missing`" + `, adapter.Balancer.KindToPass,
// see adapter.Balancer.KindToPass, package adapter's Balancer.LaneToPass.
func (c *Cache) Len() int { return 0 }

func WithShrinkProtection() {}

func decide() {}

func (c *Cache) routeWith() {}
`,
		"engine/engine_test.go": `package engine

// helper is see TestHelper's partner; see Helper2.
func helper() {}

func TestHelper() {}
`,
	})
	got := docRefs(r)
	want := []string{
		"engine/engine.go:8: the doc comment names Gone,",
		"engine/engine.go:20: the doc comment names Cache.Missing,",
		"engine/engine.go:20: the doc comment names B.Missing,",
		"engine/engine.go:20: the doc comment names WithSettle,",
		"engine/engine.go:20: the doc comment names adapter.Balancer.KindToPass,",
		"engine/engine.go:20: the doc comment names package adapter's Balancer.LaneToPass,",
		"engine/engine_test.go:3: the doc comment names Helper2,",
	}
	if len(got) != len(want) {
		t.Fatalf("findings:\n%s", strings.Join(got, "\n"))
	}
	for i, w := range want {
		if !strings.HasPrefix(got[i], w) {
			t.Errorf("finding %d: %s, want %s...", i, got[i], w)
		}
	}
}

// A doc comment of more than 30 lines is reported, whatever it documents
// (a package, a declaration, a field); one of 30 lines, a comment that
// documents nothing and a test file's are not.
func TestLongDocs(t *testing.T) {
	lines := func(n int) string { return strings.Repeat("// A line.\n", n) }
	r := writeRepo(t, map[string]string{
		"go.mod": "module example.com/m\n",
		"a.go": lines(31) + "package m\n\n" +
			lines(30) + "func F() {}\n\n" +
			"// T is a type.\ntype T struct {\n" + lines(31) + "\tX int\n}\n\n" +
			"func G() {\n" + lines(40) + "}\n",
		"b.go":      "package m\n\n" + lines(31) + "var V = 1\n",
		"a_test.go": "package m\n\n" + lines(40) + "func H() {}\n",
	})
	got := longDocs(r)
	want := []string{"a.go:1: a doc comment of 31 lines", "a.go:68: a doc comment of 31 lines", "b.go:3: a doc comment of 31 lines"}
	if len(got) != len(want) {
		t.Fatalf("findings:\n%s", strings.Join(got, "\n"))
	}
	for i, w := range want {
		if !strings.HasPrefix(got[i], w) {
			t.Errorf("finding %d: %s, want %s...", i, got[i], w)
		}
	}
}
