package graylb_test

import (
	"fmt"
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
