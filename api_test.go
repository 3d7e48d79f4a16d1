package graylb_test

import (
	"fmt"
	"go/ast"
	"go/doc"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"reflect"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/graylb/graylb"
)

// The user's API on *LoadBalancer is what a program calls; everything an
// adapter alone needs is in package adapter (package graylb's LoadBalancer is a defined type over the engine's, which
// declares only these). A method added
// to *LoadBalancer must be added here on purpose: one only adapters need
// (routing a call, reporting it, writing the decision, following rule or
// ejection changes, the Cache, the Policy) goes to package adapter.
func TestLoadBalancerMethodsAreTheUsersAPI(t *testing.T) {
	allowed := []string{
		"Close", "Detach", "Ejections", "Keys", "Pick", "RulesState", "Service",
		"Services", "SetRules", "Snapshot", "Unrouted",
	}
	var got []string
	typ := reflect.TypeOf(&graylb.LoadBalancer{})
	for i := 0; i < typ.NumMethod(); i++ {
		got = append(got, typ.Method(i).Name)
	}
	sort.Strings(got)
	assert.Equal(t, allowed, got, "the exported methods of *LoadBalancer")
	for _, adapterOnly := range []string{
		"Route", "RouteWith", "Reroute", "RerouteWith", "NewRouter", "Report",
		"KindToPass", "KindToPassWith", "LaneToPass", "LaneToPassWith", "MatchKeys",
		"RequestKind", "Decide", "Stamp", "OnEjectionChange", "OnRulesChange", "Policy", "Cache",
	} {
		_, ok := typ.MethodByName(adapterOnly)
		assert.False(t, ok, "%s is package adapter's, not the user's", adapterOnly)
	}
}

// The user's API reads in one sitting: `go doc -short .` prints at most
// 70 lines (one per const or var block, function and type, and one per
// constructor, option or const block under its type). A name that only
// some users need goes to a package of its own (policy, filter,
// filerules, debugpage, adapter; docs/api.md says which).
func TestUsersAPIFitsOnOneScreen(t *testing.T) {
	fset := token.NewFileSet()
	pkgs, err := parser.ParseDir(fset, ".", func(fi fs.FileInfo) bool {
		return !strings.HasSuffix(fi.Name(), "_test.go")
	}, parser.ParseComments)
	require.NoError(t, err)
	p := doc.New(pkgs["graylb"], "github.com/graylb/graylb", 0)
	lines := len(p.Consts) + len(p.Vars) + len(p.Funcs)
	for _, typ := range p.Types {
		lines += 1 + len(typ.Consts) + len(typ.Vars) + len(typ.Funcs)
	}
	t.Logf("go doc -short . prints %d lines", lines)
	assert.LessOrEqual(t, lines, 70, "the lines go doc -short . prints")
}

// defaults.go's comments say each default's value: a default changed in
// the engine must change its comment too.
func TestDefaultsAreWhatTheirCommentsSay(t *testing.T) {
	src, err := os.ReadFile("defaults.go")
	require.NoError(t, err)
	for name, v := range map[string]any{
		"DefaultGrayHeader": graylb.DefaultGrayHeader, "DefaultGrayKey": graylb.DefaultGrayKey,
		"DefaultUserHeader": graylb.DefaultUserHeader, "DefaultVersionHeader": graylb.DefaultVersionHeader,
		"DefaultVersionKey": graylb.DefaultVersionKey, "DefaultRuleLoadTimeout": time.Duration(graylb.DefaultRuleLoadTimeout),
		"DefaultConsecutiveFailures": graylb.DefaultConsecutiveFailures, "DefaultBaseEjectionTime": time.Duration(graylb.DefaultBaseEjectionTime),
		"DefaultMaxEjectionTime": time.Duration(graylb.DefaultMaxEjectionTime), "DefaultMaxEjectionPercent": graylb.DefaultMaxEjectionPercent,
		"DefaultEmptyGrace": time.Duration(graylb.DefaultEmptyGrace), "DefaultSettle": time.Duration(graylb.DefaultSettle),
		"DefaultSeedRetry": time.Duration(graylb.DefaultSeedRetry),
	} {
		var said string
		switch x := v.(type) {
		case string:
			said = strconv.Quote(x)
		case time.Duration:
			said = strconv.FormatFloat(x.Seconds(), 'f', -1, 64) + " s"
		default:
			said = fmt.Sprint(x)
		}
		re := regexp.MustCompile(`(?m)^\t` + name + `\s+= engine\.` + name + `\s+// ` + regexp.QuoteMeta(said) + `:`)
		assert.True(t, re.MatchString(string(src)), "defaults.go: the comment of %s must say %s", name, said)
	}
}

// A name the public packages re-export from the engine (a type alias, a
// constant or variable, a function or LoadBalancer method that returns
// the engine's) has its contract in one place: the public package's doc
// comment, which go doc shows the user. The engine's comment on it is one
// line that says where the contract is ("OutlierConfig is
// graylb.OutlierConfig."), so the two cannot drift apart.
func TestEngineDocsOfReexportedNamesPointToTheirContract(t *testing.T) {
	engineDocs := engineDocComments(t)
	n := 0
	for _, dir := range []string{".", "policy", "filter", "adapter"} {
		pub := "graylb"
		if dir != "." {
			pub = dir
		}
		for name, where := range reexported(t, dir) {
			doc, ok := engineDocs[name]
			if !ok {
				t.Errorf("%s re-exports engine.%s, which the engine does not declare", where, name)
				continue
			}
			n++
			text := strings.TrimSpace(doc)
			if strings.Contains(text, "\n") || !strings.Contains(text, pub+".") {
				t.Errorf("%s re-exports engine.%s, whose comment must be one line naming where its contract is (in package %s), not:\n%s",
					where, name, pub, doc)
			}
		}
	}
	t.Logf("%d engine comments of re-exported names checked", n)
	assert.Greater(t, n, 100, "re-exported names found: the parser missed some")
}

// reexported returns the engine names dir's package re-exports, each with
// where: a type alias, a constant or variable whose value is an engine
// name, a function whose body is "return engine.X(...)", and a method
// whose body is "return x.e().M(...)" (x.e() being the engine's
// LoadBalancer: graylb.LoadBalancer's, adapter.Balancer's), each with or
// without return.
func reexported(t *testing.T, dir string) map[string]string {
	t.Helper()
	fset := token.NewFileSet()
	pkgs, err := parser.ParseDir(fset, dir, func(fi fs.FileInfo) bool { return !strings.HasSuffix(fi.Name(), "_test.go") }, 0)
	require.NoError(t, err)
	out := map[string]string{}
	engineName := func(e ast.Expr) string {
		if sel, ok := e.(*ast.SelectorExpr); ok {
			if x, ok := sel.X.(*ast.Ident); ok && x.Name == "engine" {
				return sel.Sel.Name
			}
		}
		return ""
	}
	for _, p := range pkgs {
		for _, f := range p.Files {
			for _, d := range f.Decls {
				at := fset.Position(d.Pos()).String()
				switch d := d.(type) {
				case *ast.GenDecl:
					for _, s := range d.Specs {
						switch s := s.(type) {
						case *ast.TypeSpec:
							if n := engineName(s.Type); n != "" && s.Assign.IsValid() {
								out[n] = at
							}
						case *ast.ValueSpec:
							for _, v := range s.Values {
								if n := engineName(v); n != "" {
									out[n] = at
								}
							}
						}
					}
				case *ast.FuncDecl:
					if d.Body == nil || len(d.Body.List) != 1 {
						continue
					}
					var call *ast.CallExpr
					switch st := d.Body.List[0].(type) {
					case *ast.ReturnStmt:
						if len(st.Results) == 1 {
							call, _ = st.Results[0].(*ast.CallExpr)
						}
					case *ast.ExprStmt:
						call, _ = st.X.(*ast.CallExpr)
					}
					if call == nil {
						continue
					}
					if d.Recv == nil {
						if n := engineName(call.Fun); n != "" {
							out[n] = at
						}
						continue
					}
					// x.e().M(...): the engine LoadBalancer's method M
					if sel, ok := call.Fun.(*ast.SelectorExpr); ok {
						if inner, ok := sel.X.(*ast.CallExpr); ok {
							if e, ok := inner.Fun.(*ast.SelectorExpr); ok && e.Sel.Name == "e" {
								out["LoadBalancer."+sel.Sel.Name] = at
							}
						}
					}
				}
			}
		}
	}
	return out
}

// engineDocComments returns the comment that documents each name of
// internal/engine: a function's or method's ("LoadBalancer.Close") doc, a
// type's, a constant's or variable's own doc and line comment, else its
// group's doc.
func engineDocComments(t *testing.T) map[string]string {
	t.Helper()
	fset := token.NewFileSet()
	pkgs, err := parser.ParseDir(fset, "internal/engine", func(fi fs.FileInfo) bool { return !strings.HasSuffix(fi.Name(), "_test.go") }, parser.ParseComments)
	require.NoError(t, err)
	docs := map[string]string{}
	for _, f := range pkgs["engine"].Files {
		for _, d := range f.Decls {
			switch d := d.(type) {
			case *ast.FuncDecl:
				name := d.Name.Name
				if d.Recv != nil {
					typ := d.Recv.List[0].Type
					if s, ok := typ.(*ast.StarExpr); ok {
						typ = s.X
					}
					if id, ok := typ.(*ast.Ident); ok {
						name = id.Name + "." + name
					}
				}
				docs[name] = d.Doc.Text()
			case *ast.GenDecl:
				for _, s := range d.Specs {
					switch s := s.(type) {
					case *ast.TypeSpec:
						doc := s.Doc.Text()
						if doc == "" {
							doc = d.Doc.Text()
						}
						docs[s.Name.Name] = doc
					case *ast.ValueSpec:
						doc := s.Doc.Text() + s.Comment.Text()
						if doc == "" {
							doc = d.Doc.Text()
						}
						for _, n := range s.Names {
							docs[n.Name] = doc
						}
					}
				}
			}
		}
	}
	return docs
}
