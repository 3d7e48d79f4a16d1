package main

import (
	"bytes"
	"context"
	"crypto/md5"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/graylb/graylb"
)

// runCLI runs the command line with the environment vars and returns its
// exit code, standard output and standard error.
func runCLI(t testing.TB, vars map[string]string, args ...string) (int, string, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	e := env{stdin: strings.NewReader(""), stdout: &out, stderr: &errOut,
		getenv: func(k string) string { return vars[k] }, http: &http.Client{}}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	code := run(ctx, args, e)
	return code, out.String(), errOut.String()
}

// fakeNacos is an httptest server with Nacos' config open API and an
// instance list; it enforces casMd5 as official Nacos does.
type fakeNacos struct {
	srv *httptest.Server

	mu        sync.Mutex
	configs   map[string]string // group/dataId → content
	hosts     string            // the instance list's JSON answer (of every service not in hostsOf)
	hostsOf   map[string]string // the instance list's JSON answer by service
	services  []string          // the service list's names
	publishes int
	// beforePublish runs (unlocked) before a publish of the rules (not of
	// the rollout's lease) is applied: a concurrent writer.
	beforePublish func()
	// afterPublish runs (unlocked) after a publish of the rules landed,
	// before it is answered: a concurrent writer whose check passed
	// before this write landed.
	afterPublish func()
	// ignoreCAS: casMd5 is ignored, as r-nacos ignores it.
	ignoreCAS bool
}

func newFakeNacos(t testing.TB) *fakeNacos {
	f := &fakeNacos{configs: map[string]string{}, hosts: `{"hosts":[]}`}
	f.srv = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fakeNacos) addr() string { return strings.TrimPrefix(f.srv.URL, "http://") }

func (f *fakeNacos) serve(w http.ResponseWriter, r *http.Request) {
	r.ParseForm()
	key := r.Form.Get("tenant") + "|" + r.Form.Get("group") + "/" + r.Form.Get("dataId")
	switch {
	case r.URL.Path == "/nacos/v1/cs/configs" && r.Method == http.MethodGet:
		f.mu.Lock()
		c, ok := f.configs[key]
		f.mu.Unlock()
		if !ok {
			http.Error(w, "config data not exist", http.StatusNotFound)
			return
		}
		w.Write([]byte(c))
	case r.URL.Path == "/nacos/v1/cs/configs" && r.Method == http.MethodPost:
		rules := !strings.HasSuffix(r.Form.Get("dataId"), "."+leaseName)
		if f.beforePublish != nil && rules {
			f.beforePublish()
		}
		f.mu.Lock()
		if rules {
			f.publishes++
		}
		if cas := r.Form.Get("casMd5"); cas != "" && !f.ignoreCAS {
			sum := md5.Sum([]byte(f.configs[key]))
			if hex.EncodeToString(sum[:]) != cas {
				f.mu.Unlock()
				http.Error(w, "publish config failed: cas md5 mismatch", http.StatusInternalServerError)
				return
			}
		}
		f.configs[key] = r.Form.Get("content")
		f.mu.Unlock()
		if f.afterPublish != nil && rules {
			f.afterPublish()
		}
		w.Write([]byte("true"))
	case r.URL.Path == "/nacos/v1/cs/configs" && r.Method == http.MethodDelete:
		f.mu.Lock()
		delete(f.configs, key)
		f.mu.Unlock()
		w.Write([]byte("true"))
	case r.URL.Path == "/nacos/v1/ns/service/list":
		f.mu.Lock()
		defer f.mu.Unlock()
		names, _ := json.Marshal(f.services)
		fmt.Fprintf(w, `{"count":%d,"doms":%s}`, len(f.services), names)
	case r.URL.Path == "/nacos/v1/ns/instance/list":
		f.mu.Lock()
		defer f.mu.Unlock()
		if h, ok := f.hostsOf[r.Form.Get("serviceName")]; ok {
			w.Write([]byte(h))
			return
		}
		w.Write([]byte(f.hosts))
	default:
		http.NotFound(w, r)
	}
}

// register makes hosts (the instance list's JSON answer) the instances of
// service, and lists it among the services.
func (f *fakeNacos) register(service, hosts string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.hostsOf == nil {
		f.hostsOf = map[string]string{}
	}
	f.hostsOf[service] = hosts
	if !slices.Contains(f.services, service) {
		f.services = append(f.services, service)
	}
}

// mirror registers ins in f, by service: for tests whose callers take
// their instances from graylb's in-memory registry, since a rollout reads
// the registry.
func (f *fakeNacos) mirror(ins ...graylb.Instance) {
	by := map[string][]nacosInstance{}
	for _, in := range ins {
		by[in.Service] = append(by[in.Service], nacosInstance{IP: in.Host, Port: in.Port, Weight: in.Weight,
			Healthy: in.Healthy, Enabled: in.Enabled, Metadata: in.Metadata})
	}
	for svc, list := range by {
		b, _ := json.Marshal(map[string]any{"hosts": list})
		f.register(svc, string(b))
	}
}

// prodAndGray is an instance list of a prod and a gray instance.
const prodAndGray = `{"hosts":[{"ip":"127.0.0.1","port":9001,"weight":1,"healthy":true,"enabled":true,"metadata":{}},
 {"ip":"127.0.0.1","port":9002,"weight":1,"healthy":true,"enabled":true,"metadata":{"gray":"true"}}]}`

func (f *fakeNacos) set(group, dataID, content string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.configs["|"+group+"/"+dataID] = content
}

func (f *fakeNacos) get(group, dataID string) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.configs["|"+group+"/"+dataID]
}

func writeFile(t testing.TB, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "rules.json")
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestValidate(t *testing.T) {
	huge := `{"grayUsers":["` + strings.Repeat("u", graylb.MaxRulesSize) + `"]}`
	for _, tc := range []struct {
		name, doc string
		code      int
		want      string // in stderr
	}{
		{"valid", `{"canaryPercent": 5, "grayUsers": ["u1"]}`, 0, ""},
		{"key case", `{"Closed": true}`, 1, `unknown key "Closed"`},
		{"junk", "\x00\xff junk {{{", 1, "invalid rules"},
		{"null", `null`, 1, "invalid rules"},
		{"array", `[1,2]`, 1, "not a JSON object"},
		{"twice", `{"closed": true, "closed": false}`, 1, "appears twice"},
		{"trailing", `{} {}`, 1, "trailing data"},
		{"canary out of range", `{"canaryPercent": 101}`, 1, "within 0-100"},
		{"ambiguous address", `{"grayAddresses": ["010.0.0.7"]}`, 1, "grayAddresses[0]"},
		{"empty file", ``, 1, "invalid rules"},
		{"huge", huge, 1, "more than"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, _, stderr := runCLI(t, nil, "rules", "validate", writeFile(t, tc.doc))
			if code != tc.code || !strings.Contains(stderr, tc.want) {
				t.Fatalf("exit %d (want %d), stderr %q (want it to hold %q)", code, tc.code, stderr, tc.want)
			}
		})
	}
	t.Run("missing file", func(t *testing.T) {
		code, _, stderr := runCLI(t, nil, "rules", "validate", filepath.Join(t.TempDir(), "nope.json"))
		if code != 1 || !strings.Contains(stderr, "no such file") {
			t.Fatalf("exit %d, stderr %q", code, stderr)
		}
	})
	t.Run("json output", func(t *testing.T) {
		code, stdout, _ := runCLI(t, nil, "rules", "validate", "--output", "json", writeFile(t, `{"Closed":true}`))
		if code != 1 || !strings.Contains(stdout, `"valid": false`) || !strings.Contains(stdout, `unknown key \"Closed\"`) {
			t.Fatalf("exit %d, stdout %s", code, stdout)
		}
	})
}

func TestFlagParsing(t *testing.T) {
	for _, tc := range []struct {
		name string
		vars map[string]string
		args []string
		code int
		want string // in stdout+stderr
	}{
		{"no command", nil, nil, exitUsage, "Commands:"},
		{"help", nil, []string{"--help"}, exitOK, "Commands:"},
		{"unknown command", nil, []string{"frobnicate"}, exitUsage, `unknown command "frobnicate"`},
		{"rules without sub", nil, []string{"rules"}, exitUsage, "validate"},
		{"command help", nil, []string{"canary", "--help"}, exitOK, "-nacos string"},
		{"help lists env", nil, []string{"rules", "get", "-h"}, exitOK, "$GRAYLB_NACOS"},
		{"rollout help", nil, []string{"rollout", "--help"}, exitOK, "--max-wait"},
		{"unknown flag", nil, []string{"canary", "5", "--frob"}, exitUsage, "flag provided but not defined"},
		{"canary no arg", nil, []string{"canary"}, exitUsage, "wrong number of arguments"},
		{"canary two args", nil, []string{"canary", "5", "6"}, exitUsage, "wrong number of arguments"},
		{"canary not a number", nil, []string{"canary", "five"}, exitUsage, `"five" is not a number`},
		{"canary NaN", nil, []string{"canary", "NaN"}, exitUsage, "within 0-100"},
		{"canary negative", nil, []string{"canary", "--", "-1"}, exitUsage, "within 0-100"},
		{"canary resolution", nil, []string{"canary", "0.001"}, exitUsage, "resolution"},
		{"canary 101", nil, []string{"canary", "101"}, exitUsage, "within 0-100"},
		{"bad output", nil, []string{"rules", "get", "-o", "yaml"}, exitUsage, "text or json"},
		{"bad output from env", map[string]string{envOutput: "xml"}, []string{"rules", "get"}, exitUsage, "text or json"},
		{"both redis layouts", nil, []string{"rules", "get", "--redis", "x:1", "--redis-key", "a", "--redis-keys", "default"}, exitUsage, "different layouts"},
		{"redis key without redis", nil, []string{"rules", "get", "--redis-key", "a"}, exitUsage, "need --redis"},
		{"bad timeout", nil, []string{"rules", "get", "--timeout", "-1s"}, exitUsage, "positive"},
		{"users add none", nil, []string{"users", "add"}, exitUsage, "wrong number"},
		{"rollback takes no args", nil, []string{"rollback", "now"}, exitUsage, "wrong number"},
		{"status bad service", nil, []string{"status", "a b\n"}, exitUsage, "service"},
		{"rollout needs service", nil, []string{"rollout"}, exitUsage, "--service is required"},
		{"rollout bad steps", nil, []string{"rollout", "--service", "s", "--steps", "5,1"}, exitUsage, "must increase"},
		{"rollout steps junk", nil, []string{"rollout", "--service", "s", "--steps", "1,x"}, exitUsage, "not a number"},
		{"rollout step zero", nil, []string{"rollout", "--service", "s", "--steps", "0,5"}, exitUsage, "step of 0"},
		{"rollout bad prometheus", nil, []string{"rollout", "--service", "s", "--prometheus", "ftp://x"}, exitUsage, "http(s) URL"},
		{"rollout prometheus from env", map[string]string{envPrometheus: "nope"}, []string{"rollout", "--service", "s"}, exitUsage, `"nope"`},
		{"rollout bad min requests", nil, []string{"rollout", "--service", "s", "--min-requests", "0"}, exitUsage, "--min-requests"},
		{"rollout bad metric", nil, []string{"rollout", "--service", "s", "--metric", "x{a=\"b\"}"}, exitUsage, "--metric"},
		{"nacos with credentials", nil, []string{"rules", "get", "--nacos", "http://u:secret@127.0.0.1:1"}, exitFailed, "GRAYLB_NACOS_USERNAME"},
		{"nacos empty", nil, []string{"rules", "get", "--nacos", " , "}, exitFailed, "no nacos server"},
		{"redis bad url", nil, []string{"rules", "get", "--redis", "redis://u:secret@[::1"}, exitFailed, "--redis"},
		{"redis bad escape in the password", nil, []string{"rules", "get", "--redis", "redis://u:se%zzcret@127.0.0.1:1"}, exitFailed, "--redis"},
		{"redis bad keys", nil, []string{"rules", "get", "--redis", "127.0.0.1:1", "--redis-keys", "a,b"}, exitFailed, "three key names"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, stdout, stderr := runCLI(t, tc.vars, tc.args...)
			if code != tc.code || !strings.Contains(stdout+stderr, tc.want) {
				t.Fatalf("exit %d (want %d); want %q in the output:\n%s%s", code, tc.code, tc.want, stdout, stderr)
			}
			if strings.Contains(stdout+stderr, "secret") || strings.Contains(stdout+stderr, "%zz") {
				t.Fatalf("a password shows in the output:\n%s%s", stdout, stderr)
			}
		})
	}
}

func TestFlagsAnywhereAndEnv(t *testing.T) {
	f := newFakeNacos(t)
	// Flags after the arguments, before them, and from the environment.
	for _, args := range [][]string{
		{"canary", "5", "--nacos", f.addr(), "--group", "G"},
		{"canary", "--nacos", f.addr(), "--group=G", "5"},
	} {
		if code, out, errOut := runCLI(t, nil, args...); code != 0 {
			t.Fatalf("%v: exit %d: %s%s", args, code, out, errOut)
		}
	}
	code, out, errOut := runCLI(t, map[string]string{envNacos: f.addr(), envGroup: "G", envDataID: "d.json"}, "canary", "7")
	if code != 0 {
		t.Fatalf("exit %d: %s%s", code, out, errOut)
	}
	if got := f.get("G", "d.json"); !strings.Contains(got, `"canaryPercent": 7`) {
		t.Fatalf("the environment's group and data id were not used: %q", got)
	}
	if got := f.get("G", "graylb-rules.json"); !strings.Contains(got, `"canaryPercent": 5`) {
		t.Fatalf("stored %q", got)
	}
}

// Global flags go before the command as well as after it (and between a
// group and its subcommand); a command's own flags go after it. A flag
// before the command that is not a global one is refused, saying so.
func TestGlobalFlagsBeforeTheCommand(t *testing.T) {
	f := newFakeNacos(t)
	for _, tc := range []struct {
		args  []string
		group string
		want  string // in the stored document
	}{
		{[]string{"--nacos", f.addr(), "canary", "3"}, "DEFAULT_GROUP", `"canaryPercent": 3`},
		{[]string{"--nacos=" + f.addr(), "--group", "G", "canary", "4", "--dry-run"}, "G", ""},
		{[]string{"--nacos", f.addr(), "--group", "G", "canary", "4"}, "G", `"canaryPercent": 4`},
		{[]string{"-o", "json", "--nacos", f.addr(), "canary", "--group", "G", "6"}, "G", `"canaryPercent": 6`},
		{[]string{"--nacos", f.addr(), "users", "--group", "G", "add", "u1"}, "G", `"u1"`},
		{[]string{"--group", "G", "rules", "--nacos", f.addr(), "get"}, "G", `"u1"`},
	} {
		code, out, errOut := runCLI(t, nil, tc.args...)
		if code != exitOK {
			t.Fatalf("%q: exit %d:\n%s%s", tc.args, code, out, errOut)
		}
		if got := f.get(tc.group, "graylb-rules.json"); !strings.Contains(got, tc.want) {
			t.Fatalf("%q: %s holds %q, want %s in it", tc.args, tc.group, got, tc.want)
		}
	}
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"--dry-run", "canary", "5"}, exitUsage, "not defined: -dry-run (before COMMAND only the flags every command takes; a command's own flags go after it)"},
		{[]string{"--frob", "canary", "5"}, exitUsage, "flag provided but not defined: -frob"},
		{[]string{"--nacos"}, exitUsage, "flag needs an argument: -nacos"},
		{[]string{"--nacos", f.addr()}, exitUsage, "Commands:"},
		{[]string{"--nacos", f.addr(), "--help"}, exitOK, "Commands:"},
		{[]string{"--nacos", f.addr(), "frob"}, exitUsage, `unknown command "frob"`},
		{[]string{"--timeout", "nope", "canary", "5"}, exitUsage, "invalid value"},
	} {
		code, out, errOut := runCLI(t, nil, tc.args...)
		if code != tc.code || !strings.Contains(out+errOut, tc.want) {
			t.Errorf("%q: exit %d (want %d), want %q in:\n%s%s", tc.args, code, tc.code, tc.want, out, errOut)
		}
	}
	// The usage says where the flags go.
	_, out, _ := runCLI(t, nil, "--help")
	if !strings.Contains(out, "Usage: graylb [FLAG...] COMMAND [ARG...] [FLAG...]") || !strings.Contains(out, "--nacos") {
		t.Errorf("the usage does not say that flags go before or after the command:\n%s", out)
	}
}

func TestShortcutsNacos(t *testing.T) {
	f := newFakeNacos(t)
	f.set("DEFAULT_GROUP", "graylb-rules.json", `{"grayAddresses": ["10.0.0.7"], "matches": [{"key": "x-lane", "exact": "a", "version": "v2"}]}`)
	n := []string{"--nacos", f.addr()}
	steps := []struct {
		args []string
		want graylb.Rules
	}{
		{[]string{"canary", "12.5"}, graylb.Rules{CanaryPercent: 12.5}},
		{[]string{"users", "add", "u1", "u2", "u1"}, graylb.Rules{CanaryPercent: 12.5, GrayUsers: []string{"u1", "u2"}}},
		{[]string{"users", "rm", "u1", "nobody"}, graylb.Rules{CanaryPercent: 12.5, GrayUsers: []string{"u2"}}},
		{[]string{"rollback"}, graylb.Rules{CanaryPercent: 12.5, GrayUsers: []string{"u2"}, Closed: true}},
		{[]string{"resume"}, graylb.Rules{CanaryPercent: 12.5, GrayUsers: []string{"u2"}}},
	}
	for _, s := range steps {
		code, out, errOut := runCLI(t, nil, append(s.args, n...)...)
		if code != 0 {
			t.Fatalf("%v: exit %d: %s%s", s.args, code, out, errOut)
		}
		got, err := graylb.ParseRules([]byte(f.get("DEFAULT_GROUP", "graylb-rules.json")))
		if err != nil {
			t.Fatal(err)
		}
		s.want.GrayAddresses = []string{"10.0.0.7"} // kept
		s.want.Matches = []graylb.Match{{Key: "x-lane", Exact: "a", Version: "v2"}}
		if !sameRules(got, s.want) {
			t.Fatalf("%v: stored %+v, want %+v", s.args, got, s.want)
		}
	}
	// Dry run writes nothing; an unchanged value writes nothing.
	before := f.publishes
	if code, out, _ := runCLI(t, nil, append([]string{"canary", "50", "--dry-run"}, n...)...); code != 0 || !strings.Contains(out, "dry run") {
		t.Fatalf("dry run: exit %d: %s", code, out)
	}
	if code, out, _ := runCLI(t, nil, append([]string{"canary", "12.5"}, n...)...); code != 0 || !strings.Contains(out, "unchanged") {
		t.Fatalf("unchanged: exit %d: %s", code, out)
	}
	if f.publishes != before {
		t.Fatalf("%d writes for a dry run and an unchanged value", f.publishes-before)
	}
}

func TestShortcutRefusesInvalidStoredRules(t *testing.T) {
	f := newFakeNacos(t)
	f.set("DEFAULT_GROUP", "graylb-rules.json", `{"Closed": true}`)
	code, _, errOut := runCLI(t, nil, "canary", "5", "--nacos", f.addr())
	if code != exitFailed || !strings.Contains(errOut, `unknown key "Closed"`) || !strings.Contains(errOut, "rules apply") {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	if f.get("DEFAULT_GROUP", "graylb-rules.json") != `{"Closed": true}` {
		t.Fatal("an invalid document was modified")
	}
	// rules apply repairs it.
	code, out, errOut := runCLI(t, nil, "rules", "apply", writeFile(t, `{"closed": true}`), "--nacos", f.addr())
	if code != 0 || !strings.Contains(out, "written") {
		t.Fatalf("apply: exit %d: %s%s", code, out, errOut)
	}
}

func TestApplyConflict(t *testing.T) {
	f := newFakeNacos(t)
	f.set("DEFAULT_GROUP", "graylb-rules.json", `{"canaryPercent": 1}`)
	// Someone writes between apply's read and its write.
	f.beforePublish = func() { f.set("DEFAULT_GROUP", "graylb-rules.json", `{"closed": true}`) }
	code, _, errOut := runCLI(t, nil, "rules", "apply", writeFile(t, `{"canaryPercent": 50}`), "--nacos", f.addr())
	if code != exitFailed || !strings.Contains(errOut, "changed since they were read") {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	if got := f.get("DEFAULT_GROUP", "graylb-rules.json"); got != `{"closed": true}` {
		t.Fatalf("the concurrent write was overwritten: %q", got)
	}
	// A shortcut reads again and applies itself to the new content.
	f.beforePublish = nil
	calls := 0
	f.beforePublish = func() {
		if calls++; calls == 1 {
			f.set("DEFAULT_GROUP", "graylb-rules.json", `{"closed": true, "grayUsers": ["x"]}`)
		}
	}
	code, out, errOut := runCLI(t, nil, "canary", "5", "--nacos", f.addr(), "-o", "json")
	if code != 0 || !strings.Contains(out, `"attempts": 2`) {
		t.Fatalf("exit %d: %s%s", code, out, errOut)
	}
	got, _ := graylb.ParseRules([]byte(f.get("DEFAULT_GROUP", "graylb-rules.json")))
	if !got.Closed || got.CanaryPercent != 5 || len(got.GrayUsers) != 1 {
		t.Fatalf("stored %+v: the concurrent change was lost", got)
	}
}

func TestApplyRefusesInvalidFile(t *testing.T) {
	f := newFakeNacos(t)
	code, _, errOut := runCLI(t, nil, "rules", "apply", writeFile(t, `{"canaryPercent": "5"}`), "--nacos", f.addr())
	if code != exitFailed || !strings.Contains(errOut, "nothing written") || f.publishes != 0 {
		t.Fatalf("exit %d, %d writes: %s", code, f.publishes, errOut)
	}
}

func TestDiffExitStatus(t *testing.T) {
	f := newFakeNacos(t)
	f.set("DEFAULT_GROUP", "graylb-rules.json", `{"canaryPercent":1}`)
	if code, out, _ := runCLI(t, nil, "rules", "diff", writeFile(t, "{\n \"canaryPercent\": 1\n}"), "--nacos", f.addr()); code != 0 || out != "" {
		t.Fatalf("equal documents: exit %d, %q", code, out)
	}
	code, out, _ := runCLI(t, nil, "rules", "diff", writeFile(t, `{"canaryPercent":2}`), "--nacos", f.addr())
	if code != 1 || !strings.Contains(out, `-   "canaryPercent": 1`) || !strings.Contains(out, `+   "canaryPercent": 2`) {
		t.Fatalf("exit %d: %s", code, out)
	}
	// Trouble is 2, as diff(1) (docs/operations.md): an invalid file, an
	// unreachable store.
	if code, _, errOut := runCLI(t, nil, "rules", "diff", writeFile(t, `{"Closed":true}`), "--nacos", f.addr()); code != 2 || !strings.Contains(errOut, `"Closed"`) {
		t.Fatalf("invalid file: exit %d: %s", code, errOut)
	}
	if code, _, errOut := runCLI(t, nil, "rules", "diff", writeFile(t, `{}`), "--nacos", "127.0.0.1:1", "--timeout", "2s"); code != 2 || !strings.Contains(errOut, "no nacos server answered") {
		t.Fatalf("unreachable store: exit %d: %s", code, errOut)
	}
}

func TestNacosUnreachable(t *testing.T) {
	code, _, errOut := runCLI(t, nil, "rules", "get", "--nacos", "127.0.0.1:1,127.0.0.1:2", "--timeout", "2s")
	if code != exitFailed || !strings.Contains(errOut, "no nacos server answered") {
		t.Fatalf("exit %d: %s", code, errOut)
	}
}

func TestNacosGarbageAnswers(t *testing.T) {
	for _, body := range []string{"", "<html>", `{"hosts": "x"}`, strings.Repeat("[", 1<<16)} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/nacos/v1/cs/configs" {
				http.NotFound(w, r)
				return
			}
			w.Write([]byte(body))
		}))
		code, _, errOut := runCLI(t, nil, "status", "svc", "--nacos", strings.TrimPrefix(srv.URL, "http://"))
		srv.Close()
		if code != exitFailed || !strings.Contains(errOut, "not an instance list") {
			t.Fatalf("%.20q: exit %d: %s", body, code, errOut)
		}
	}
}

func TestStatus(t *testing.T) {
	f := newFakeNacos(t)
	f.hosts = `{"hosts":[
	 {"ip":"127.0.0.1","port":9001,"weight":1,"healthy":true,"enabled":true,"metadata":{"version":"v1"}},
	 {"ip":"127.0.0.1","port":9002,"weight":1,"healthy":true,"enabled":true,"metadata":{"gray":"true","version":"v2"}},
	 {"ip":"::ffff:127.0.0.3","port":9003,"weight":1,"healthy":false,"enabled":true,"metadata":{"version":"v2\u001b[31m"}},
	 {"ip":"010.0.0.1","port":9004,"weight":1,"healthy":true,"enabled":true}]}`
	f.set("DEFAULT_GROUP", "graylb-rules.json", `{"grayAddresses": ["127.0.0.3", "10.9.9.9"]}`)
	code, out, errOut := runCLI(t, nil, "status", "svc", "--nacos", f.addr())
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	for _, want := range []string{
		`127\.0\.0\.1:9002\s+gray\s+metadata`,
		`\[::ffff:127\.0\.0\.3\]:9003\s+gray\s+address`, // canonical comparison: the mapped address is 127.0.0.3
		`"v2\\x1b\[31m"`,                    // registry text escaped
		`010\.0\.0\.1:9004\s+-\s.*refused:`, // 010.0.0.1 is refused by clients
		`grayAddresses entry "10\.9\.9\.9" matches no instance`,
		"no rule sends requests",
	} {
		if !regexp.MustCompile(want).MatchString(out) {
			t.Errorf("status output lacks %q:\n%s", want, out)
		}
	}
	f.set("DEFAULT_GROUP", "graylb-rules.json", `{"closed": true, "canaryPercent": 5}`)
	_, out, _ = runCLI(t, nil, "status", "svc", "--nacos", f.addr(), "-o", "json")
	if !strings.Contains(out, "the rules are closed") || !strings.Contains(out, `"grayBy": "metadata"`) {
		t.Fatalf("closed rules: %s", out)
	}
}

func TestNacosLogin(t *testing.T) {
	f := newFakeNacos(t)
	logins := 0
	auth := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r.ParseForm()
		if r.URL.Path == "/nacos/v1/auth/login" {
			if r.Form.Get("username") != "ops" || r.Form.Get("password") != "s3cret" {
				http.Error(w, "unknown user", http.StatusForbidden)
				return
			}
			logins++
			w.Write([]byte(`{"accessToken":"tok-1","tokenTtl":18000}`))
			return
		}
		if r.Form.Get("accessToken") != "tok-1" {
			http.Error(w, "no token", http.StatusForbidden)
			return
		}
		f.serve(w, r)
	})
	srv := httptest.NewServer(auth)
	defer srv.Close()
	addr := strings.TrimPrefix(srv.URL, "http://")
	vars := map[string]string{envNacos: addr, envUsername: "ops", envPassword: "s3cret"}
	if code, out, errOut := runCLI(t, vars, "canary", "5"); code != 0 {
		t.Fatalf("exit %d: %s%s", code, out, errOut)
	}
	if logins != 1 {
		t.Fatalf("%d logins for one command, want 1", logins)
	}
	vars[envPassword] = "wrong"
	code, out, errOut := runCLI(t, vars, "rules", "get")
	if code != exitFailed || !strings.Contains(errOut, `login as "ops"`) || strings.Contains(out+errOut, "wrong") {
		t.Fatalf("exit %d: %s%s", code, out, errOut)
	}
}

// Nacos refusing a compare-and-set write for a reason of its own (an
// error status while the document did not change): after its attempts
// the shortcut's error carries the server's answer, not only "changed
// since they were read".
func TestShortcutConflictSaysWhatNacosAnswered(t *testing.T) {
	f := newFakeNacos(t)
	f.set("DEFAULT_GROUP", "graylb-rules.json", `{"canaryPercent": 1}`)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			http.Error(w, "config storage full", http.StatusInternalServerError)
			return
		}
		f.serve(w, r)
	}))
	t.Cleanup(srv.Close)
	code, _, errOut := runCLI(t, nil, "canary", "5", "--nacos", strings.TrimPrefix(srv.URL, "http://"))
	if code != exitFailed || !strings.Contains(errOut, "config storage full") {
		t.Fatalf("exit %d: %s", code, errOut)
	}
}

// Interrupted (SIGINT) while its write is in flight, a shortcut cannot
// know whether the write landed: it reads the rules back and says where
// they are, with the exit status of an interruption, rather than report a
// failure of a write that Nacos applied.
func TestShortcutInterruptedDuringItsWrite(t *testing.T) {
	f := newFakeNacos(t)
	f.set("DEFAULT_GROUP", "graylb-rules.json", `{"canaryPercent": 1}`)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			f.serve(w, r)
			return
		}
		f.serve(httptest.NewRecorder(), r) // the write lands; its answer is lost
		cancel()
		select {
		case <-r.Context().Done():
		case <-time.After(10 * time.Second):
		}
	}))
	t.Cleanup(srv.Close)
	var out, errOut bytes.Buffer
	code := run(ctx, []string{"canary", "5", "--nacos", strings.TrimPrefix(srv.URL, "http://")}, env{stdin: strings.NewReader(""),
		stdout: &out, stderr: &errOut, getenv: func(string) string { return "" }, http: &http.Client{}})
	if got := storedRules(t, f); got.CanaryPercent != 5 {
		t.Fatalf("stored %+v: the write did not land", got)
	}
	if code != exitSignal || !strings.Contains(out.String()+errOut.String(), "canary 5%") {
		t.Fatalf("exit %d (want %d, saying the rules are at canary 5%%):\n%s%s", code, exitSignal, out.String(), errOut.String())
	}
}

// An access token that expired (Nacos' tokenTtl, 5 hours by default: a
// long rollout outlives it) is replaced by a new login, not reported as a
// failure of every later read and write (the rollout's rollback
// included).
func TestNacosTokenExpires(t *testing.T) {
	f := newFakeNacos(t)
	f.set("DEFAULT_GROUP", "graylb-rules.json", `{"canaryPercent": 1}`)
	var mu sync.Mutex
	logins, valid := 0, ""
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r.ParseForm()
		mu.Lock()
		if r.URL.Path == "/nacos/v1/auth/login" {
			logins++
			valid = fmt.Sprintf("tok-%d", logins)
			mu.Unlock()
			fmt.Fprintf(w, `{"accessToken":%q,"tokenTtl":18000}`, valid)
			return
		}
		ok := r.Form.Get("accessToken") == valid
		mu.Unlock()
		if !ok {
			http.Error(w, "token expired!", http.StatusForbidden)
			return
		}
		f.serve(w, r)
	}))
	defer srv.Close()
	api, err := newNacosAPI(strings.TrimPrefix(srv.URL, "http://"), "", "ops", "s3cret", &http.Client{Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	st := &nacosStore{api: api, dataID: "graylb-rules.json", group: "DEFAULT_GROUP"}
	ctx := context.Background()
	if _, err := st.get(ctx); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	valid = "" // the token expires
	mu.Unlock()
	if _, err := modify(ctx, st, false, setClosed(true)); err != nil {
		t.Fatalf("after the token expired: %v", err)
	}
	if r := storedRules(t, f); !r.Closed {
		t.Fatalf("stored %+v, want closed", r)
	}
	if logins != 2 {
		t.Fatalf("%d logins, want 2 (the first, and one when the token expired)", logins)
	}
}

// The rollback lever works on a stored document every client refuses
// (they keep the rules they had, a canary included): graylb rollback
// replaces it with closed rules, which they take at once, and shows the
// text it replaced. The other shortcuts still refuse it.
func TestRollbackOverInvalidStoredRules(t *testing.T) {
	f := newFakeNacos(t)
	const invalid = `{"canaryPercent": 50, "Closed": true}`
	f.set("DEFAULT_GROUP", "graylb-rules.json", invalid)
	code, out, errOut := runCLI(t, nil, "rollback", "--nacos", f.addr())
	if code != exitOK || !strings.Contains(out, `"Closed"`) {
		t.Fatalf("exit %d, want 0 with the replaced text in the diff:\n%s%s", code, out, errOut)
	}
	if r := storedRules(t, f); !r.Closed {
		t.Fatalf("stored %+v, want closed", r)
	}
	f.set("DEFAULT_GROUP", "graylb-rules.json", invalid)
	if code, _, _ := runCLI(t, nil, "resume", "--nacos", f.addr()); code != exitFailed || f.get("DEFAULT_GROUP", "graylb-rules.json") != invalid {
		t.Fatalf("resume over an invalid document: exit %d, stored %s", code, f.get("DEFAULT_GROUP", "graylb-rules.json"))
	}
}
