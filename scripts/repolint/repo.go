package main

import (
	"bufio"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
)

// repo is the Go code of a repository: its modules and their packages.
type repo struct {
	root    string
	fset    *token.FileSet
	modules map[string]string // directory (slash-separated, relative to root, "." for the root) → module path
	pkgs    []*pkg
	byPath  map[string]*pkg // import path → its package (test files apart)
}

// pkg is one package: the files of one directory that share a package
// name, test files (of the package or its external test package) apart
// from the others.
type pkg struct {
	dir    string // relative to the repository's root
	module string // the module's path
	path   string // the import path
	name   string
	test   bool // the _test.go files of the directory whose package is name
	files  []*ast.File
	paths  []string // each file's path, relative to the root
}

// loadRepo parses every Go file under root but those the go command
// ignores (directories named testdata, or starting with "." or "_").
func loadRepo(root string) (*repo, error) {
	r := &repo{root: root, fset: token.NewFileSet(), modules: map[string]string{}, byPath: map[string]*pkg{}}
	dirs := map[string][]string{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if p != root && (name == "testdata" || name == "vendor" || strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_")) {
				return filepath.SkipDir
			}
			return nil
		}
		rel, err := filepath.Rel(root, p)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		switch {
		case name == "go.mod":
			mod, err := modulePath(p)
			if err != nil {
				return err
			}
			r.modules[path.Dir(rel)] = mod
		case strings.HasSuffix(name, ".go"):
			dirs[path.Dir(rel)] = append(dirs[path.Dir(rel)], rel)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	names := make([]string, 0, len(dirs))
	for d := range dirs {
		names = append(names, d)
	}
	sort.Strings(names)
	for _, dir := range names {
		modDir, mod := r.moduleOf(dir)
		if mod == "" {
			continue // outside every module
		}
		importPath := mod
		if dir != modDir {
			importPath = mod + "/" + strings.TrimPrefix(dir, strings.TrimSuffix(modDir, ".")+"/")
			if modDir == "." {
				importPath = mod + "/" + dir
			}
		}
		byKey := map[string]*pkg{}
		for _, rel := range dirs[dir] {
			f, err := parser.ParseFile(r.fset, filepath.Join(root, filepath.FromSlash(rel)), nil, parser.ParseComments)
			if err != nil {
				return nil, err
			}
			test := strings.HasSuffix(rel, "_test.go")
			key := f.Name.Name
			if test {
				key += " test"
			}
			p := byKey[key]
			if p == nil {
				p = &pkg{dir: dir, module: mod, path: importPath, name: f.Name.Name, test: test}
				byKey[key] = p
				r.pkgs = append(r.pkgs, p)
				if !test {
					r.byPath[importPath] = p
				}
			}
			p.files = append(p.files, f)
			p.paths = append(p.paths, rel)
		}
	}
	return r, nil
}

// moduleOf returns the directory and path of the module dir belongs to:
// the nearest go.mod at or above it.
func (r *repo) moduleOf(dir string) (modDir, mod string) {
	for d := dir; ; d = path.Dir(d) {
		if m, ok := r.modules[d]; ok {
			return d, m
		}
		if d == "." || d == "/" {
			return "", ""
		}
	}
}

// moduleOwning returns the repository's module whose path is the longest
// prefix of importPath, "" when none is.
func (r *repo) moduleOwning(importPath string) string {
	best := ""
	for _, m := range r.modules {
		if (importPath == m || strings.HasPrefix(importPath, m+"/")) && len(m) > len(best) {
			best = m
		}
	}
	return best
}

// modulePath reads the module path of a go.mod file.
func modulePath(file string) (string, error) {
	f, err := os.Open(file)
	if err != nil {
		return "", err
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if fields := strings.Fields(s.Text()); len(fields) >= 2 && fields[0] == "module" {
			return strings.Trim(fields[1], `"`), nil
		}
	}
	return "", s.Err()
}
