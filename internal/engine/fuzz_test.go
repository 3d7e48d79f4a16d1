package engine

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

func FuzzIsGray(f *testing.F) {
	for _, s := range grayValues {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if IsGray(s) != (len(s) == 4 && strings.ToLower(s) == "true" && isASCII(s)) {
			t.Fatalf("IsGray(%q) = %v", s, IsGray(s))
		}
	})
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= 0x80 {
			return false
		}
	}
	return true
}

func FuzzParseRules(f *testing.F) {
	for _, s := range []string{`{}`, `{"closed":true}`, `{"grayUsers":["a"],"canaryPercent":5}`, `{"grayAddresses":["h:1"]}`, `{`,
		`null`, `{"closed":true,"closed":false}`, `{"Closed":true}`, `{"canaryPercent":0.004}`, `{"grayUsers":null}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		r, err := ParseRules(data)
		if err != nil {
			if !errors.Is(err, ErrInvalidRules) {
				t.Fatalf("error does not wrap ErrInvalidRules: %v", err)
			}
			return
		}
		if err := r.Validate(); err != nil {
			t.Fatalf("parsed rules do not validate: %v", err)
		}
		// An accepted document is an object whose keys are Rules' keys to
		// the letter, none of them null, and its canary is exact.
		var top map[string]json.RawMessage
		if err := json.Unmarshal(data, &top); err != nil || top == nil {
			t.Fatalf("accepted a document that is not an object: %q", data)
		}
		for k, v := range top {
			if !ruleKeys[k] || string(v) == "null" {
				t.Fatalf("accepted key %q = %s", k, v)
			}
		}
		if c, _ := compileRules(r); r.CanaryPercent > 0 && c.canary == 0 {
			t.Fatalf("accepted canaryPercent %v, which rounds to 0", r.CanaryPercent)
		}
	})
}

// FuzzChain drives the chain over an instance list and request decoded from
// the fuzzer's bytes and checks the invariants of the gray rule.
func FuzzChain(f *testing.F) {
	f.Add([]byte{3, 1, 0, 2}, "true", "v1")
	f.Add([]byte{0}, "false", "")
	f.Add([]byte{9, 9, 9, 1, 4, 7}, "junk", "v2")
	f.Fuzz(func(t *testing.T, spec []byte, gray, version string) {
		if len(spec) > 64 {
			spec = spec[:64]
		}
		list := make([]Instance, 0, len(spec))
		for i, b := range spec {
			in := inst("svc", 3000+i)
			in.Metadata["gray"] = grayValues[int(b)%len(grayValues)]
			if b&0x10 != 0 {
				in.Metadata["version"] = []string{"v1", "v2"}[int(b>>5)&1]
			}
			if b&0x80 != 0 {
				in.Healthy = false
			}
			list = append(list, in)
		}
		lb, err := New(&fakeSource{list: list}, WithContextHandler(testHandler), WithFilters(NewVersionFilter()))
		if err != nil {
			t.Fatal(err)
		}
		defer lb.Close()
		ctx := withHeaders(context.Background(), "gray", gray, "version", version)
		for k := 0; k < 4; k++ {
			got, err := lb.Pick(ctx, "svc")
			if e := checkPick(list, IsGray(gray), got, err); e != nil {
				t.Fatal(e)
			}
		}
	})
}
