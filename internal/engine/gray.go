package engine

import (
	"math/rand/v2"
	"unsafe"

	"github.com/graylb/graylb/internal/cacheline"
	"github.com/graylb/graylb/internal/routestate"
)

// The default key names are graylb.DefaultGrayHeader and the others.
const (
	DefaultGrayHeader    = "gray"
	DefaultGrayKey       = "gray"
	DefaultUserHeader    = "uid"
	DefaultVersionHeader = "version"
	DefaultVersionKey    = "version"
)

// grayFilter is the gray decision: the fixed root of every routing tree.
// It decides a request's kind and narrows the candidates to it; the
// user's filters run after it, over what it left.
type grayFilter struct {
	header     string
	metaKey    string
	userHeader string
	selfGray   bool
}

func defaultGrayFilter() grayFilter {
	return grayFilter{header: DefaultGrayHeader, metaKey: DefaultGrayKey, userHeader: DefaultUserHeader}
}

// build partitions the candidates into prod, gray and all. A list already
// in that order (every prod instance before every gray one, as a list with
// no gray instance is) is not copied: prod and gray are runs of it, which
// the tree does not own (see grayStage.owned). Otherwise prod and gray are
// one copy. all is every instance: prod itself when no instance is gray,
// else the list itself.
func (f *grayFilter) build(instances []Instance, rl *compiledRules) *grayStage {
	n := len(instances)
	p, inOrder, seenGray := 0, true, false
	for _, inst := range instances {
		switch {
		case f.instanceKind(inst, rl) == Gray:
			seenGray = true
		case seenGray:
			inOrder = false // a prod instance after a gray one
			p++
		default:
			p++
		}
	}
	st := &grayStage{grayStageFields: grayStageFields{f: f, rules: rl}}
	if inOrder {
		st.prod, st.gray = instances[:p:p], instances[p:n:n]
	} else {
		// One backing array: prod fills it from the front, gray from the back.
		buf := cacheline.Slice[Instance](n)
		q, g := 0, n
		for _, inst := range instances {
			if f.instanceKind(inst, rl) == Gray {
				g--
				buf[g] = inst
			} else {
				buf[q] = inst
				q++
			}
		}
		gray := buf[g:]
		for i, j := 0, len(gray)-1; i < j; i, j = i+1, j-1 { // keep the list's order
			gray[i], gray[j] = gray[j], gray[i]
		}
		st.prod, st.gray, st.owned = buf[:q:q], gray, true
	}
	st.plain = rl.enabled && !rl.closed && !f.selfGray && len(rl.users) == 0 && len(rl.matches) == 0 && rl.canary == 0
	// "all" is reachable only when routing is off or no gray instance
	// exists; otherwise leave it empty so later filters skip building it.
	switch {
	case rl.closed:
	case len(st.gray) == 0:
		st.all = st.prod
	case !rl.enabled:
		st.all = instances[:n:n]
	}
	return st
}

// instanceKind is an instance's kind: gray by its metadata or by the rules'
// gray addresses.
func (f *grayFilter) instanceKind(inst Instance, rl *compiledRules) Kind {
	if IsGray(inst.Metadata[f.metaKey]) || rl.grayAddress(inst) {
		return Gray
	}
	return Prod
}

// decideRequest is requestKind that also returns the lane (the version) a
// match rule gave the request, "" when none did.
func (f *grayFilter) decideRequest(r *Request, rl *compiledRules) (Kind, KindSource, string) {
	src := FromDefault
	// The call's own keys (an adapter's reader, then the ContextHandlers),
	// as Request.handlerValue reads them, written out: this runs on every
	// pick that is not a flat walk.
	v := ""
	if r.call != nil {
		v = r.call.Value(r.Context, f.header)
	}
	if v == "" && r.handler != nil {
		v = r.handler.Value(r.Context, f.header)
	}
	if v == "" {
		v = r.admittedAs(f.header, routestate.RoleGray)
	}
	if v != "" {
		src = FromKey
	} else if v = r.contextValue(f.header); v != "" {
		src = FromContext
	} else if d := r.state.Decided(); d.Set {
		return Kind(d.Kind), KindSource(d.Source), d.Lane // fixed by Detach
	} else if f.selfGray {
		return Gray, FromSelf, ""
	}
	if IsGray(v) {
		return Gray, src, ""
	}
	if len(rl.users) > 0 {
		if uid := r.valueAs(f.userHeader, routestate.RoleUser); uid != "" {
			if _, ok := rl.users[uid]; ok {
				return Gray, FromRules, ""
			}
		}
	}
	if src != FromDefault {
		return Prod, src, ""
	}
	if len(rl.matches) > 0 {
		if m := rl.match(r); m != nil {
			if m.gray {
				return Gray, FromRules, m.version
			}
			return Prod, FromRules, m.version
		}
	}
	// The canary draws once per request served: the first draw is kept in
	// the request's routing state, and every call the request makes, over
	// any transport and through any LoadBalancer, has its kind.
	if gray, ok := r.drawn(); ok {
		return kindOf(gray), FromRules, ""
	}
	if rl.canary > 0 {
		var h uint32
		if uid := r.value(f.userHeader); uid != "" {
			h = fnv32(uid) % canaryScale
		} else {
			h = rand.Uint32N(canaryScale)
		}
		return kindOf(r.draw(h < rl.canary)), FromRules, ""
	}
	return Prod, src, ""
}

// drawn returns the canary's draw recorded for the request being served,
// false when there is none.
func (r *Request) drawn() (gray, ok bool) {
	if r.state == nil {
		return false, false // the usual case, inlined: no state
	}
	return r.state.Drawn()
}

// draw records the canary's draw for the request being served (the first
// one recorded wins) and returns the one in force.
func (r *Request) draw(gray bool) bool { return r.state.Draw(gray) }

func kindOf(gray bool) Kind {
	if gray {
		return Gray
	}
	return Prod
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

// Subset indexes of the gray stage; grayIdxNone is no subset (a shadow
// copy with nowhere to go).
const (
	grayIdxProd = iota
	grayIdxGray
	grayIdxAll
	grayIdxNone = -1
)

// grayStage is the gray decision built over one instance list.
type grayStage struct {
	grayStageFields
	_ [cacheline.Size - unsafe.Sizeof(grayStageFields{})%cacheline.Size]byte // whole cache lines (see package cacheline)
}

// grayStageFields are the fields of a grayStage, which pads them to whole cache
// lines.
type grayStageFields struct {
	f               *grayFilter
	rules           *compiledRules
	prod, gray, all []Instance
	// owned: prod and gray are a copy of the tree's own (a VersionFilter
	// after the gray decision may reorder them in place); all is owned
	// when it is prod.
	owned bool
	// plain: routing is on and open, and neither the rules (gray users,
	// match rules, canary) nor the caller's own flag classify a request:
	// its own value alone decides (tree.pick's flat walk).
	plain bool
}

func (s *grayStage) subsets() [][]Instance { return [][]Instance{s.prod, s.gray, s.all} }

// grayDecision is what a routing tree keeps of its gray stage: what a
// request's decision reads (the lists are the tree's subtrees').
type grayDecision struct {
	f       *grayFilter
	rules   *compiledRules
	hasGray bool // some instance is gray
}

func (s *grayStage) decision() grayDecision {
	return grayDecision{f: s.f, rules: s.rules, hasGray: len(s.gray) > 0}
}

// decide applies the precedence of the rules: closed (no request reaches
// a gray instance), then enabled=false (every instance for every request),
// then the request's kind, gray falling back to every instance when there
// is no gray one.
//
// It also returns the lane a match rule gave the request ("" when none).
func (s *grayDecision) decide(r *Request) (int, decision) {
	rl := s.rules
	k, src, lane := s.f.decideRequest(r, rl)
	d := decision{kind: k, source: src, lane: lane, outcome: Selected}
	if r.state.IsShadow() {
		// A shadow copy goes to gray instances only: no fall-back, closed
		// rules or routing off included.
		d.kind, d.source = Gray, FromKey
		if !s.hasGray || rl.closed || !rl.enabled {
			d.outcome = Failed
			return grayIdxNone, d
		}
		return grayIdxGray, d
	}
	switch {
	case rl.closed && k == Gray:
		d.outcome = FellBack
		return grayIdxProd, d
	case rl.closed:
		return grayIdxProd, d
	case !rl.enabled:
		d.outcome = Bypassed
		return grayIdxAll, d
	case k == Prod:
		return grayIdxProd, d
	case s.hasGray:
		return grayIdxGray, d
	}
	d.outcome = FellBack
	return grayIdxAll, d
}

// decision is what the gray decision made of one request.
type decision struct {
	kind    Kind
	source  KindSource // what decided the kind
	outcome Outcome
	lane    string // the version a match rule gave it
}
