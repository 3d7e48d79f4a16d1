package graylb

import (
	"math"
	"math/rand/v2"
)

// Kind is a request's or an instance's side: Prod or Gray.
type Kind uint8

const (
	Prod Kind = iota // production
	Gray             // gray (canary)
)

func (k Kind) String() string {
	if k == Gray {
		return "gray"
	}
	return "prod"
}

// KindOf normalises a gray value: "true" in any letter case is Gray,
// anything else (absent, empty, "false", "yes", "1", " true") is Prod.
func KindOf(v string) Kind {
	if IsGray(v) {
		return Gray
	}
	return Prod
}

// IsGray reports whether v is "true" in any ASCII letter case. Nothing is
// trimmed.
func IsGray(v string) bool {
	// b|0x20 folds an upper-case ASCII letter to lower case; for these four
	// letters no other byte folds to the same value.
	return len(v) == 4 && v[0]|0x20 == 't' && v[1]|0x20 == 'r' && v[2]|0x20 == 'u' && v[3]|0x20 == 'e'
}

// Defaults of the GrayFilter.
const (
	DefaultGrayHeader  = "gray"    // request header that carries the request's gray value
	DefaultGrayKey     = "gray"    // instance metadata key that marks a gray instance
	DefaultUserHeader  = "uid"     // request header that carries the user id
	DefaultVersionKey  = "version" // request header and metadata key of version routing
	HighestPrecedence  = math.MinInt
	DefaultFilterOrder = 0
)

// GrayFilter decides a request's kind and narrows the candidates to it
// (DESIGN §2 and §3). It always runs first in a LoadBalancer's chain.
type GrayFilter struct {
	header     string
	metaKey    string
	userHeader string
	selfGray   bool
}

// GrayOption configures a GrayFilter.
type GrayOption func(*GrayFilter)

// WithGrayHeader sets the request header that carries the gray value
// (default "gray"; seeds 001/002 use "gray-tag").
func WithGrayHeader(name string) GrayOption {
	return func(f *GrayFilter) {
		if name != "" {
			f.header = name
		}
	}
}

// WithGrayKey sets the instance metadata key that marks a gray instance
// (default "gray").
func WithGrayKey(key string) GrayOption {
	return func(f *GrayFilter) {
		if key != "" {
			f.metaKey = key
		}
	}
}

// WithUserHeader sets the request header that carries the user id checked
// against the gray-user rule and hashed by the canary rule (default "uid").
func WithUserHeader(name string) GrayOption {
	return func(f *GrayFilter) {
		if name != "" {
			f.userHeader = name
		}
	}
}

// WithSelfGray sets the calling service's own gray flag: the request's
// value when neither the header nor the context carries one. A gray
// deployment calls gray downstream by default (seed 000's SERVER_GRAY).
func WithSelfGray(gray bool) GrayOption {
	return func(f *GrayFilter) { f.selfGray = gray }
}

// NewGrayFilter returns a GrayFilter with the given options.
func NewGrayFilter(opts ...GrayOption) *GrayFilter {
	f := &GrayFilter{header: DefaultGrayHeader, metaKey: DefaultGrayKey, userHeader: DefaultUserHeader}
	for _, o := range opts {
		if o != nil {
			o(f)
		}
	}
	return f
}

// Header is the request header the filter reads.
func (f *GrayFilter) Header() string { return f.header }

// UserHeader is the user-id header the filter reads.
func (f *GrayFilter) UserHeader() string { return f.userHeader }

// Key is the instance metadata key the filter reads.
func (f *GrayFilter) Key() string { return f.metaKey }

// Order is HighestPrecedence: the gray filter runs first.
func (f *GrayFilter) Order() int { return HighestPrecedence }

// Build partitions the candidates into prod, gray and all.
func (f *GrayFilter) Build(in BuildInfo) Stage {
	rl := in.rules
	if rl == nil {
		rl = defaultCompiledRules
	}
	// One backing array: prod fills it from the front, gray from the back.
	n := len(in.Instances)
	buf := make([]Instance, n)
	p, g := 0, n
	for _, inst := range in.Instances {
		if f.instanceKind(inst, rl) == Gray {
			g--
			buf[g] = inst
		} else {
			buf[p] = inst
			p++
		}
	}
	gray := buf[g:]
	for i, j := 0, len(gray)-1; i < j; i, j = i+1, j-1 { // keep the list's order
		gray[i], gray[j] = gray[j], gray[i]
	}
	st := &grayStage{f: f, rules: rl, prod: buf[:p:p], gray: gray}
	// "all" is reachable only when routing is off or no gray instance
	// exists; otherwise leave it empty so later filters skip building it.
	if !rl.closed && (!rl.enabled || len(gray) == 0) {
		st.all = in.Instances
	}
	return st
}

// InstanceKind reports an instance's kind from its metadata alone.
func (f *GrayFilter) InstanceKind(inst Instance) Kind {
	return f.instanceKind(inst, defaultCompiledRules)
}

func (f *GrayFilter) instanceKind(inst Instance, rl *compiledRules) Kind {
	if IsGray(inst.Metadata[f.metaKey]) || rl.grayAddress(inst) {
		return Gray
	}
	return Prod
}

// KindSource says what decided a request's kind.
type KindSource uint8

const (
	// FromDefault: nothing said anything; the request is prod.
	FromDefault KindSource = iota
	// FromKey: the gray key the call carries (a header, gRPC metadata).
	FromKey
	// FromContext: a value the program put on the context (WithValue).
	FromContext
	// FromSelf: the caller's own gray flag (WithSelfGray).
	FromSelf
	// FromRules: a gray-user rule matched, or the canary was drawn.
	FromRules
)

// Travels reports whether the next hop can see the decision without being
// told: only a key the call carries travels on its own (the adapters pass
// it on). For any other source an adapter writes the kind on the outgoing
// call, so every hop routes the same way.
func (s KindSource) Travels() bool { return s == FromKey || s == FromDefault }

// RequestKind reports the kind of the request in r, rules aside: the first
// non-empty of the header (through the ContextHandler), the context value
// and the caller's own flag.
func (f *GrayFilter) RequestKind(r Request) Kind {
	k, _ := f.requestKind(r, defaultCompiledRules)
	return k
}

// requestKind applies the request's own value, then the gray-user and
// canary rules; it reports what decided.
func (f *GrayFilter) requestKind(r Request, rl *compiledRules) (Kind, KindSource) {
	src := FromDefault
	v := ""
	if r.handler != nil {
		v = r.handler.Value(r.Context, f.header)
	}
	if v != "" {
		src = FromKey
	} else if v = ValueFrom(r.Context, f.header); v != "" {
		src = FromContext
	} else if f.selfGray {
		return Gray, FromSelf
	}
	if IsGray(v) {
		return Gray, src
	}
	if len(rl.users) > 0 {
		if uid := r.Value(f.userHeader); uid != "" {
			if _, ok := rl.users[uid]; ok {
				return Gray, FromRules
			}
		}
	}
	if src == FromDefault && rl.canary > 0 {
		var h uint32
		if uid := r.Value(f.userHeader); uid != "" {
			h = fnv32(uid) % canaryScale
		} else {
			h = rand.Uint32N(canaryScale)
		}
		if h < rl.canary {
			return Gray, FromRules
		}
		return Prod, FromRules
	}
	return Prod, src
}

// fnv32 is FNV-1a over s, without allocating.
func fnv32(s string) uint32 {
	h := uint32(2166136261)
	for i := 0; i < len(s); i++ {
		h ^= uint32(s[i])
		h *= 16777619
	}
	return h
}

// Subset indexes of the gray stage.
const (
	grayIdxProd = iota
	grayIdxGray
	grayIdxAll
)

type grayStage struct {
	f               *GrayFilter
	rules           *compiledRules
	prod, gray, all []Instance
}

func (s *grayStage) Subsets() [][]Instance { return [][]Instance{s.prod, s.gray, s.all} }

func (s *grayStage) Choose(r Request) int {
	i, _, _ := s.decide(r)
	return i
}

// decide applies the precedence of DESIGN §3: closed, then enabled, then the
// request's kind.
func (s *grayStage) decide(r Request) (int, Kind, Outcome) {
	rl := s.rules
	if rl.closed {
		if k, _ := s.f.requestKind(r, rl); k == Gray {
			return grayIdxProd, Gray, FellBack
		}
		return grayIdxProd, Prod, Selected
	}
	if !rl.enabled {
		k, _ := s.f.requestKind(r, rl)
		return grayIdxAll, k, Bypassed
	}
	if k, _ := s.f.requestKind(r, rl); k == Prod {
		return grayIdxProd, Prod, Selected
	}
	if len(s.gray) > 0 {
		return grayIdxGray, Gray, Selected
	}
	return grayIdxAll, Gray, FellBack
}
