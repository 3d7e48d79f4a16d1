package docs

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/graylb/graylb"
)

var update = flag.Bool("update", false, "rewrite the Go code blocks of README.md and docs/*.md from their regions")

var (
	regionStart = regexp.MustCompile(`^(\s*)// snippet: ([a-z0-9-]+)$`)
	regionEnd   = regexp.MustCompile(`^\s*// end snippet$`)
	marker      = regexp.MustCompile(`^<!-- snippet: ([a-z0-9-]+) -->$`)
)

// region is one snippet's source.
type region struct {
	text string // the lines, less the start line's indentation, each ending in "\n"; no blank line at the end
	file string
	used bool
}

// readRegions returns the regions of the _test.go files of dir by name.
func readRegions(dir string) (map[string]*region, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*_test.go"))
	if err != nil {
		return nil, err
	}
	regions := map[string]*region{}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		var (
			name, indent string
			body         strings.Builder
			startLine    int
		)
		lines := strings.Split(string(data), "\n")
		for i, line := range lines {
			if m := regionStart.FindStringSubmatch(line); m != nil {
				if name != "" {
					return nil, fmt.Errorf("%s:%d: snippet %q starts inside snippet %q", f, i+1, m[2], name)
				}
				if regions[m[2]] != nil {
					return nil, fmt.Errorf("%s:%d: snippet %q is defined twice (also in %s)", f, i+1, m[2], regions[m[2]].file)
				}
				name, indent, startLine = m[2], m[1], i+1
				body.Reset()
				continue
			}
			if regionEnd.MatchString(line) {
				if name == "" {
					return nil, fmt.Errorf("%s:%d: end snippet without a start", f, i+1)
				}
				// gofmt may put a blank line before the end marker.
				text := strings.TrimRight(body.String(), "\n") + "\n"
				regions[name] = &region{text: text, file: filepath.Base(f)}
				name = ""
				continue
			}
			if name == "" {
				continue
			}
			switch {
			case strings.TrimSpace(line) == "":
				body.WriteString("\n")
			case strings.HasPrefix(line, indent):
				body.WriteString(strings.TrimPrefix(line, indent) + "\n")
			default:
				return nil, fmt.Errorf("%s:%d: snippet %q: line indented less than its start", f, i+1, name)
			}
		}
		if name != "" {
			return nil, fmt.Errorf("%s:%d: snippet %q has no end", f, startLine, name)
		}
	}
	return regions, nil
}

// block is one fenced code block of a Markdown file.
type block struct {
	lang       string
	name       string // the snippet marker's name on the line before, "" if none
	start, end int    // the lines of the body: lines[start:end]
}

// codeBlocks returns the fenced code blocks of lines (``` fences only).
func codeBlocks(lines []string) ([]block, error) {
	var out []block
	for i := 0; i < len(lines); i++ {
		lang, ok := strings.CutPrefix(lines[i], "```")
		if !ok {
			continue
		}
		b := block{lang: strings.TrimSpace(lang), start: i + 1}
		if i > 0 {
			if m := marker.FindStringSubmatch(lines[i-1]); m != nil {
				b.name = m[1]
			}
		}
		j := i + 1
		for ; j < len(lines) && lines[j] != "```"; j++ {
		}
		if j == len(lines) {
			return nil, fmt.Errorf("line %d: code block never closed", i+1)
		}
		b.end = j
		out = append(out, b)
		i = j
	}
	return out, nil
}

// markdownFiles returns README.md and the guides.
func markdownFiles(t *testing.T) []string {
	t.Helper()
	guides, err := filepath.Glob("*.md")
	if err != nil {
		t.Fatal(err)
	}
	return append([]string{filepath.Join("..", "README.md")}, guides...)
}

// moduleSnippets are the folders of the modules whose guide's snippets
// their own tests compile and run, because this module does not depend on
// the framework they integrate: docs/go-zero.md's are in
// gozero/snippets_test.go.
var moduleSnippets = []string{"../gozero"}

func TestSnippets(t *testing.T) {
	regions, err := readRegions(".")
	if err != nil {
		t.Fatal(err)
	}
	for _, dir := range moduleSnippets {
		more, err := readRegions(dir)
		if err != nil {
			t.Fatal(err)
		}
		for name, r := range more {
			if regions[name] != nil {
				t.Fatalf("snippet %q is defined twice: in %s and in %s", name, regions[name].file, filepath.Join(dir, r.file))
			}
			r.file = filepath.Join(dir, r.file)
			regions[name] = r
		}
	}
	for _, file := range markdownFiles(t) {
		data, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(string(data), "\n")
		blocks, err := codeBlocks(lines)
		if err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		var out []string // the file rewritten (with -update)
		last := 0
		for _, b := range blocks {
			at := fmt.Sprintf("%s:%d", file, b.start)
			body := strings.Join(lines[b.start:b.end], "\n") + "\n"
			if b.start == b.end {
				body = ""
			}
			switch {
			case b.lang == "json":
				if _, err := graylb.ParseRules([]byte(body)); err != nil {
					t.Errorf("%s: a JSON block is not a rules document graylb accepts: %v", at, err)
				}
				continue
			case b.lang != "go":
				continue
			case b.name == "":
				t.Errorf("%s: a Go code block without a <!-- snippet: name --> line before it: put its code in a region of a docs/*_test.go file", at)
				continue
			}
			r := regions[b.name]
			if r == nil {
				t.Errorf("%s: no region %q in docs/*_test.go", at, b.name)
				continue
			}
			r.used = true
			if body == r.text {
				continue
			}
			if *update {
				out = append(append(out, lines[last:b.start]...), strings.Split(strings.TrimSuffix(r.text, "\n"), "\n")...)
				last = b.end
				continue
			}
			t.Errorf("%s: snippet %q differs from its region in docs/%s (go test -run TestSnippets -update . in docs/ rewrites it):\n%s",
				at, b.name, r.file, firstDifference(body, r.text))
		}
		if *update && out != nil {
			out = append(out, lines[last:]...)
			if err := os.WriteFile(file, []byte(strings.Join(out, "\n")), 0o644); err != nil {
				t.Fatal(err)
			}
			t.Logf("rewrote %s", file)
		}
	}
	var unused []string
	for name, r := range regions {
		if !r.used {
			unused = append(unused, name+" ("+r.file+")")
		}
	}
	sort.Strings(unused)
	for _, u := range unused {
		t.Errorf("snippet %s is shown in no Markdown file", u)
	}
}

// firstDifference shows the first line where the Markdown and the region
// differ.
func firstDifference(doc, src string) string {
	d, s := strings.Split(doc, "\n"), strings.Split(src, "\n")
	for i := 0; i < len(d) || i < len(s); i++ {
		var dl, sl string
		if i < len(d) {
			dl = d[i]
		}
		if i < len(s) {
			sl = s[i]
		}
		if dl != sl {
			return fmt.Sprintf("  line %d of the block\n  markdown: %q\n  region:   %q", i+1, dl, sl)
		}
	}
	return ""
}

// The checker itself: regions are read as written, blocks are found and
// named, and a mismatch, a missing region, an unnamed Go block and an
// unused region are each reported.
func TestSnippetChecker(t *testing.T) {
	dir := t.TempDir()
	src := "package docs\n\nfunc f() {\n\t// snippet: one\n\tx := 1\n\n\t_ = x\n\t// end snippet\n}\n"
	if err := os.WriteFile(filepath.Join(dir, "a_test.go"), []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	regions, err := readRegions(dir)
	if err != nil {
		t.Fatal(err)
	}
	if got := regions["one"].text; got != "x := 1\n\n_ = x\n" {
		t.Fatalf("region one: %q", got)
	}
	md := "text\n<!-- snippet: one -->\n```go\nx := 1\n\n_ = x\n```\n```go\nunnamed\n```\n```json\n{}\n```\n"
	blocks, err := codeBlocks(strings.Split(md, "\n"))
	if err != nil {
		t.Fatal(err)
	}
	if len(blocks) != 3 || blocks[0].name != "one" || blocks[1].name != "" || blocks[2].lang != "json" {
		t.Fatalf("blocks: %+v", blocks)
	}
	if _, err := codeBlocks([]string{"```go", "never closed"}); err == nil {
		t.Error("an unclosed block was accepted")
	}
	for _, bad := range []string{
		"package docs\n// snippet: a\n",                                // no end
		"package docs\n// end snippet\n",                               // no start
		"package docs\n\t// snippet: a\nx\n\t// end snippet\n",         // indented less
		"package docs\n// snippet: a\n// snippet: b\n// end snippet\n", // nested
	} {
		d := t.TempDir()
		if err := os.WriteFile(filepath.Join(d, "b_test.go"), []byte(bad), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := readRegions(d); err == nil {
			t.Errorf("accepted %q", bad)
		}
	}
	if !bytes.Contains([]byte(firstDifference("a\nb\n", "a\nc\n")), []byte("line 2")) {
		t.Error("firstDifference does not name line 2")
	}
}
