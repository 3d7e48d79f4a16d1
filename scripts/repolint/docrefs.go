package main

import (
	"fmt"
	"go/ast"
	"regexp"
	"strconv"
	"strings"
	"unicode"
)

// docRefs reports the references to Go names in doc comments (of
// declarations, struct fields and packages, tests included) that name
// nothing. A reference is a name, a type and its member, or a
// package and its name (each perhaps followed by "()"), written
//
//   - as a doc link, in square brackets;
//   - in backticks;
//   - after "see ";
//   - after "package p's ", for a name in package p.
//
// Code blocks (indented lines that are not list items) are left out.
// Only what can be told from prose is checked: a single word when it may
// be a Go name (it has an upper-case letter, an underscore, or call
// parentheses: Close, routeWith, WithSettle, decide()), not a word like
// "below"; a qualified reference when its qualifier is a
// type of the package (its member must be a method or field of a type of
// the package, or of the type an alias names) or a package of the
// repository (an import of the file, or the p of "package p's"). A
// qualifier that is a variable, or a package from outside the repository,
// is not checked.
func docRefs(r *repo) []string {
	all := map[string]*decls{}      // what a package's importers see, by import path
	wide := map[string]*decls{}     // a directory's packages, their tests included, by import path
	byName := map[string][]*decls{} // wide, by package name, for "package p's"
	files := map[string][]*ast.File{}
	for _, p := range r.pkgs {
		files[p.path] = append(files[p.path], p.files...)
		if !p.test {
			all[p.path] = declsOf(p.name, p.files)
		}
	}
	for _, p := range r.pkgs {
		if !p.test && wide[p.path] == nil {
			wide[p.path] = declsOf(p.name, files[p.path])
			byName[p.name] = append(byName[p.name], wide[p.path])
		}
	}
	var own []*decls // what each package's files see of their package
	for _, p := range r.pkgs {
		d := all[p.path]
		if p.test {
			fs := p.files
			if d != nil && d.name == p.name { // in-package tests
				fs = append(fs, r.byPath[p.path].files...)
			}
			d = declsOf(p.name, fs)
		}
		own = append(own, d)
	}
	for _, ds := range [][]*decls{own, mapValues(all), mapValues(wide)} {
		for _, d := range ds {
			for name, to := range d.aliasTo {
				if t := all[to.path]; t != nil {
					d.aliases[name] = alias{t, to.name}
				}
			}
		}
	}
	var out []string
	for k, p := range r.pkgs {
		for i, f := range p.files {
			imports := map[string]*decls{}
			for _, imp := range f.Imports {
				path, _ := strconv.Unquote(imp.Path.Value)
				d := all[path]
				if d == nil {
					continue
				}
				name := d.name
				if imp.Name != nil {
					name = imp.Name.Name
				}
				imports[name] = d
			}
			c := checker{self: own[k], imports: imports, byName: byName}
			for _, g := range docComments(f) {
				for _, ref := range refsIn(g.Text()) {
					if !c.exists(ref) {
						out = append(out, fmt.Sprintf("%s:%d: the doc comment names %s, which does not exist in package %s",
							p.paths[i], r.fset.Position(g.Pos()).Line, ref.text, p.name))
					}
				}
			}
		}
	}
	return out
}

func mapValues(m map[string]*decls) []*decls {
	out := make([]*decls, 0, len(m))
	for _, d := range m {
		out = append(out, d)
	}
	return out
}

// decls are the names a package declares.
type decls struct {
	name    string
	top     map[string]bool            // functions, types, variables, constants
	members map[string]map[string]bool // a type's methods and fields (of a struct or an interface)
	any     map[string]bool            // every type's members
	aliasTo map[string]target          // type T = pkg.U: T's target, by import path
	aliases map[string]alias           // the same, resolved in the repository
}

// target is a type of another package, by import path.
type target struct{ path, name string }

// alias is a type of another package of the repository.
type alias struct {
	d    *decls
	name string
}

// declsOf returns what files, of package name, declare.
func declsOf(name string, files []*ast.File) *decls {
	d := &decls{name: name, top: map[string]bool{}, members: map[string]map[string]bool{}, any: map[string]bool{},
		aliasTo: map[string]target{}, aliases: map[string]alias{}}
	member := func(typ, name string) {
		if d.members[typ] == nil {
			d.members[typ] = map[string]bool{}
		}
		d.members[typ][name] = true
		d.any[name] = true
	}
	for _, f := range files {
		imports := map[string]string{} // by the name the file uses
		for _, imp := range f.Imports {
			path, _ := strconv.Unquote(imp.Path.Value)
			name := path[strings.LastIndex(path, "/")+1:]
			if imp.Name != nil {
				name = imp.Name.Name
			}
			imports[name] = path
		}
		for _, decl := range f.Decls {
			switch decl := decl.(type) {
			case *ast.FuncDecl:
				if decl.Recv == nil || len(decl.Recv.List) == 0 {
					d.top[decl.Name.Name] = true
					continue
				}
				member(receiverType(decl.Recv.List[0].Type), decl.Name.Name)
			case *ast.GenDecl:
				for _, spec := range decl.Specs {
					switch spec := spec.(type) {
					case *ast.TypeSpec:
						d.top[spec.Name.Name] = true
						if sel, ok := spec.Type.(*ast.SelectorExpr); ok && spec.Assign.IsValid() {
							if x, ok := sel.X.(*ast.Ident); ok && imports[x.Name] != "" {
								d.aliasTo[spec.Name.Name] = target{imports[x.Name], sel.Sel.Name}
							}
						}
						var fields *ast.FieldList
						switch t := spec.Type.(type) {
						case *ast.StructType:
							fields = t.Fields
						case *ast.InterfaceType:
							fields = t.Methods
						}
						if fields == nil {
							continue
						}
						for _, fl := range fields.List {
							for _, n := range fl.Names {
								member(spec.Name.Name, n.Name)
							}
							if len(fl.Names) == 0 { // embedded: named by its type
								member(spec.Name.Name, receiverType(fl.Type))
							}
						}
					case *ast.ValueSpec:
						for _, n := range spec.Names {
							d.top[n.Name] = true
						}
					}
				}
			}
		}
	}
	return d
}

// receiverType is the name of a receiver's or an embedded field's type:
// T, *T, T with type arguments, pkg.T (T).
func receiverType(e ast.Expr) string {
	for {
		switch t := e.(type) {
		case *ast.StarExpr:
			e = t.X
		case *ast.IndexExpr:
			e = t.X
		case *ast.IndexListExpr:
			e = t.X
		case *ast.SelectorExpr:
			return t.Sel.Name
		case *ast.Ident:
			return t.Name
		default:
			return ""
		}
	}
}

// docComments returns the package's, the declarations' and the struct
// fields' doc comments of f.
func docComments(f *ast.File) []*ast.CommentGroup {
	var out []*ast.CommentGroup
	add := func(g *ast.CommentGroup) {
		if g != nil {
			out = append(out, g)
		}
	}
	add(f.Doc)
	for _, decl := range f.Decls {
		switch decl := decl.(type) {
		case *ast.FuncDecl:
			add(decl.Doc)
		case *ast.GenDecl:
			add(decl.Doc)
			for _, spec := range decl.Specs {
				switch spec := spec.(type) {
				case *ast.TypeSpec:
					add(spec.Doc)
					var fields *ast.FieldList
					switch t := spec.Type.(type) {
					case *ast.StructType:
						fields = t.Fields
					case *ast.InterfaceType:
						fields = t.Methods
					}
					if fields != nil {
						for _, fl := range fields.List {
							add(fl.Doc)
						}
					}
				case *ast.ValueSpec:
					add(spec.Doc)
				}
			}
		}
	}
	return out
}

// ref is one reference found in a comment: the package named by "package
// p's", if any, then the name, its parts split at the dots.
type ref struct {
	text  string
	pkg   string
	parts []string
	call  bool // written name()
}

var (
	docLink    = regexp.MustCompile(`\[([A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*){0,2})\]`)
	backticked = regexp.MustCompile("`([A-Za-z_][A-Za-z0-9_]*(?:\\.[A-Za-z_][A-Za-z0-9_]*){0,2}(?:\\(\\))?)`")
	seeRef     = regexp.MustCompile(`\b[Ss]ee ([A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*){0,2}(?:\(\))?)`)
	pkgRef     = regexp.MustCompile(`\bpackage ([a-z][a-z0-9_]*)'s ([A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*){0,2}(?:\(\))?)`)
)

// listItem is the start of a list item's line.
var listItem = regexp.MustCompile(`^\s*([-*+•]|[0-9]+[.)])\s`)

// refsIn returns the references of a comment's text.
func refsIn(text string) []ref {
	var prose []string
	for _, l := range strings.Split(text, "\n") {
		if l == "" || l[0] != ' ' && l[0] != '\t' || listItem.MatchString(l) {
			prose = append(prose, l)
		}
	}
	text = strings.Join(strings.Fields(strings.Join(prose, " ")), " ") // a reference may be cut by a line end
	var out []ref
	add := func(pkgName, s string) {
		r := ref{text: s, pkg: pkgName}
		if pkgName != "" {
			r.text = "package " + pkgName + "'s " + s
		}
		s, r.call = strings.CutSuffix(s, "()")
		r.parts = strings.Split(s, ".")
		out = append(out, r)
	}
	for _, m := range docLink.FindAllStringSubmatchIndex(text, -1) {
		if end := m[1]; end < len(text) && (text[end] == '(' || text[end] == ':') {
			continue // a Markdown link, or a link's definition
		}
		add("", text[m[2]:m[3]])
	}
	for _, m := range backticked.FindAllStringSubmatch(text, -1) {
		add("", m[1])
	}
	for _, m := range seeRef.FindAllStringSubmatch(text, -1) {
		add("", m[1])
	}
	for _, m := range pkgRef.FindAllStringSubmatch(text, -1) {
		add(m[1], m[2])
	}
	return out
}

// checker resolves the references of one file's comments.
type checker struct {
	self    *decls
	imports map[string]*decls   // the file's imports of the repository's packages, by the name it uses
	byName  map[string][]*decls // the repository's packages by name
}

// exists reports whether r names something, or cannot be checked.
func (c checker) exists(r ref) bool {
	if len(r.parts) == 1 && !r.call && !goLike(r.parts[0]) || predeclared[r.parts[0]] {
		return true // prose, or not the package's
	}
	if r.pkg != "" {
		for _, d := range c.byName[r.pkg] {
			if in(d, r.parts) {
				return true
			}
		}
		return len(c.byName[r.pkg]) == 0 // not a package of the repository: not checked
	}
	if len(r.parts) == 1 {
		n := r.parts[0]
		return c.self.top[n] || c.self.any[n] || c.imports[n] != nil || len(c.byName[n]) > 0
	}
	q := r.parts[0]
	switch {
	case c.self.members[q] != nil || c.self.top[q]:
		return in(c.self, r.parts)
	case c.imports[q] != nil:
		return in(c.imports[q], r.parts[1:])
	case q == c.self.name:
		return in(c.self, r.parts[1:])
	}
	return true // a variable, or a package from outside the repository
}

// in reports whether d declares parts: a name, or a type and its member.
func in(d *decls, parts []string) bool {
	switch {
	case len(parts) == 0:
		return true
	case len(parts) == 1:
		return d.top[parts[0]] || d.any[parts[0]]
	case !d.top[parts[0]]:
		return false
	}
	if a, ok := d.aliases[parts[0]]; ok {
		return in(a.d, append([]string{a.name}, parts[1:]...))
	}
	if _, ok := d.aliasTo[parts[0]]; ok {
		return true // an alias of a type from outside the repository
	}
	// A member of the type, or of a type it embeds: any type's member.
	return d.members[parts[0]][parts[1]] || d.any[parts[1]]
}

// goLike reports whether a single word may be a Go name rather than a
// word of prose: it has an upper-case letter or an underscore.
func goLike(s string) bool {
	for _, r := range s {
		if r == '_' || unicode.IsUpper(r) {
			return true
		}
	}
	return false
}

var predeclared = map[string]bool{}

func init() {
	for _, n := range strings.Fields(`bool byte complex64 complex128 error float32 float64 int int8 int16 int32 int64 rune string
		uint uint8 uint16 uint32 uint64 uintptr any comparable true false iota nil append cap clear close complex copy delete
		imag len make max min new panic print println real recover`) {
		predeclared[n] = true
	}
}
