package shadow

import (
	"bytes"
	"encoding/json"
	"sort"
	"strconv"
	"strings"
)

// diffJSON returns the paths at which a and b, two JSON documents, differ
// ("" is the root; keys join with ".", array elements are "[i]"), sorted;
// ok is false when either is not JSON.
func diffJSON(a, b []byte) (paths []string, ok bool) {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return nil, false
	}
	walkDiff("", x, y, &paths)
	sort.Strings(paths)
	return paths, true
}

// maxDiffPaths bounds the paths one comparison reports.
const maxDiffPaths = 64

func walkDiff(path string, x, y any, out *[]string) {
	if len(*out) >= maxDiffPaths {
		return
	}
	switch xv := x.(type) {
	case map[string]any:
		yv, ok := y.(map[string]any)
		if !ok {
			*out = append(*out, path)
			return
		}
		for k, v := range xv {
			walkDiff(join(path, k), v, yv[k], out)
		}
		for k, v := range yv {
			if _, seen := xv[k]; !seen {
				walkDiff(join(path, k), nil, v, out)
			}
		}
	case []any:
		yv, ok := y.([]any)
		if !ok {
			*out = append(*out, path)
			return
		}
		for i := 0; i < max(len(xv), len(yv)); i++ {
			var a, b any
			if i < len(xv) {
				a = xv[i]
			}
			if i < len(yv) {
				b = yv[i]
			}
			walkDiff(path+"["+strconv.Itoa(i)+"]", a, b, out)
		}
	default:
		if !sameScalar(x, y) {
			*out = append(*out, path)
		}
	}
}

func sameScalar(x, y any) bool {
	switch xv := x.(type) {
	case nil:
		return y == nil
	case string:
		yv, ok := y.(string)
		return ok && xv == yv
	case float64:
		yv, ok := y.(float64)
		return ok && xv == yv
	case bool:
		yv, ok := y.(bool)
		return ok && xv == yv
	}
	return false
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// pattern is a path with every array index written [*]: the form noise
// is learned and ignored in.
func pattern(path string) string {
	if !strings.Contains(path, "[") {
		return path
	}
	var b strings.Builder
	for i := 0; i < len(path); i++ {
		if path[i] == '[' {
			j := strings.IndexByte(path[i:], ']')
			if j > 0 {
				b.WriteString("[*]")
				i += j
				continue
			}
		}
		b.WriteByte(path[i])
	}
	return b.String()
}

// matches reports whether path (written with indexes) is covered by the
// ignored pattern p: p equal to its pattern, or a prefix of it ending at a
// key or an index ("items[*]" covers "items[3].id"), "*" in p standing for
// any one key.
func matches(p, path string) bool {
	q := pattern(path)
	if p == q || p == "" {
		return true
	}
	ps, qs := splitPath(p), splitPath(q)
	if len(ps) > len(qs) {
		return false
	}
	for i := range ps {
		if ps[i] != "*" && ps[i] != qs[i] {
			return false
		}
	}
	return true
}

// splitPath splits a pattern into its keys and [*] steps.
func splitPath(p string) []string {
	var out []string
	for _, part := range strings.Split(p, ".") {
		for {
			i := strings.Index(part, "[*]")
			if i < 0 {
				break
			}
			if i > 0 {
				out = append(out, part[:i])
			}
			out = append(out, "[*]")
			part = part[i+3:]
		}
		if part != "" {
			out = append(out, part)
		}
	}
	return out
}

// sameBody reports whether two complete bodies are the same: as JSON
// without the paths ignore covers (when both are JSON), else byte for byte.
// It returns the differing paths (nil for bytes).
func sameBody(a, b []byte, ignore func(string) bool) (bool, []string) {
	paths, ok := diffJSON(a, b)
	if !ok {
		return bytes.Equal(a, b), nil
	}
	var left []string
	for _, p := range paths {
		if !ignore(p) {
			left = append(left, p)
		}
	}
	return len(left) == 0, left
}
