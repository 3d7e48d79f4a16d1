// Package routestate is the routing state of the request a service is
// serving, kept on its context.Context whatever transport the request came
// over: what a server side admitted (the routing keys the caller sent and
// the trust boundary let through, and whether the caller is outside that
// boundary) and the canary's draw for it, made once. Package graylb reads it on every pick; package adapter writes
// it (server sides) and reads it (client sides), so a request received
// over one transport keeps its kind on calls made over any other.
//
// It is internal: programs and adapters reach it through package adapter
// (Admit, Kept) and package graylb (WithUntrustedCaller, UntrustedCaller).
package routestate

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"
	"unsafe"
)

// Pair is one routing key and its value. Name is in lower case (ASCII):
// header and metadata names are case-insensitive, and gRPC metadata keys
// are lower case.
type Pair struct {
	Name, Value string
}

// State is the routing state of one request being served. It is made by
// New when a server side admits the request and is never modified after,
// except for the canary's draw recorded once by Draw. A nil *State is
// valid: it has no pairs, trusts its caller and has drawn nothing.
type State struct {
	// parent is the context With published the State on: the State is
	// that context's child carrying it (one allocation for both).
	parent    context.Context
	pairs     []Pair
	values    []string // values[i] is pairs[i].Value: one-element slices without allocating
	untrusted bool
	drawn     atomic.Uint32 // 0: not drawn; drawnProd, drawnGray
	// roles[r] is 1 + the index of the pair that holds role r as the
	// server side that admitted the request names it (0: none): a
	// LoadBalancer whose key names differ reads the request's gray key,
	// user and version there.
	roles [numRoles]uint8
	// decided is the request's kind, what decided it and its lane, fixed
	// by Detach (decidedSet unset: none): later decisions take it.
	decided Decided
	// shadow: the request is a shadow copy (a mirrored prod request): its
	// calls go to gray instances only and write nothing.
	shadow bool
	// sample: the request is a noise sample (a mirrored prod request sent
	// to prod again): its calls route as a prod request's and write
	// nothing.
	sample bool
	// The first pairs and values live in the State itself: admitting a
	// request's few routing keys is one allocation.
	pairBuf [inlinePairs]Pair
	valBuf  [inlinePairs]string
}

// Role is what a key means to the LoadBalancer that reads it.
type Role uint8

// The roles a State keeps (SetRole).
const (
	RoleGray Role = iota
	RoleUser
	RoleVersion
	numRoles
)

// Decided is a request's decision as Detach fixes it: Kind and Source are
// the engine's (Kind 0 prod, 1 gray); Lane is a match rule's version.
type Decided struct {
	Set          bool
	Kind, Source uint8
	Lane         string
}

// inlinePairs is how many pairs a State holds without another allocation.
const inlinePairs = 2

const (
	drawnProd = 1
	drawnGray = 2
)

// New returns the state of a request whose admitted keys are pairs (names
// in lower case, values not empty, each name once) and whose caller is
// untrusted or not. New copies pairs.
func New(pairs []Pair, untrusted bool) *State {
	s := &State{untrusted: untrusted}
	for _, p := range pairs {
		s.Add(p.Name, p.Value)
	}
	return s
}

// Add adds a pair (a lower-case name not added before, a value not empty)
// to a State that is not yet on any context: the server side that admits
// the request adds its keys, then publishes the State with With.
func (s *State) Add(name, value string) {
	if s.pairs == nil {
		s.pairs, s.values = s.pairBuf[:0], s.valBuf[:0]
	}
	s.pairs = append(s.pairs, Pair{Name: name, Value: value})
	s.values = append(s.values, value)
}

// SetRole says that the pair named name (added already, lower case)
// holds role r, on a State not yet on any context. A name not added is
// ignored.
func (s *State) SetRole(r Role, name string) {
	for i := range s.pairs {
		if s.pairs[i].Name == name && i < 255 {
			s.roles[r] = uint8(i + 1)
			return
		}
	}
}

// Role returns the value of the pair that holds role r, "" when none.
func (s *State) Role(r Role) string {
	if s == nil || s.roles[r] == 0 {
		return ""
	}
	return s.pairs[s.roles[r]-1].Value
}

// SetShadow marks a State not yet on any context as a shadow copy's.
func (s *State) SetShadow() { s.shadow = true }

// IsShadow reports whether the request is a shadow copy.
func (s *State) IsShadow() bool { return s != nil && s.shadow }

// SetSample marks a State not yet on any context as a noise sample's.
func (s *State) SetSample() { s.sample = true }

// IsSample reports whether the request is a noise sample.
func (s *State) IsSample() bool { return s != nil && s.sample }

// Decided returns the decision fixed for the request (see Detached).
func (s *State) Decided() Decided {
	if s == nil {
		return Decided{}
	}
	return s.decided
}

// Detached returns a State for work that outlives the request: s's pairs,
// roles, trust and canary draw, and d as the request's fixed decision. It
// is new: With publishes it on a context of the caller's choosing.
func (s *State) Detached(d Decided) *State {
	out := &State{decided: d}
	if s != nil {
		for _, p := range s.pairs {
			out.Add(p.Name, p.Value)
		}
		out.untrusted, out.roles, out.shadow, out.sample = s.untrusted, s.roles, s.shadow, s.sample
		out.drawn.Store(s.drawn.Load())
	}
	return out
}

// Untrusted returns the state of a request whose caller is untrusted: no
// admitted key (what the caller sent routes nothing), nothing drawn; s
// itself when it is such a state already.
func (s *State) Untrusted() *State {
	if s != nil && s.untrusted && len(s.pairs) == 0 {
		return s
	}
	return New(nil, true)
}

// IsUntrusted reports whether the request's caller is outside the trust
// boundary.
func (s *State) IsUntrusted() bool { return s != nil && s.untrusted }

// Pairs returns the admitted keys. The slice is shared: do not modify it.
func (s *State) Pairs() []Pair {
	if s == nil {
		return nil
	}
	return s.pairs
}

// ValueSlice returns pairs[i].Value as a one-element slice shared by every
// caller (an http.Header value): do not modify it.
func (s *State) ValueSlice(i int) []string { return s.values[i : i+1 : i+1] }

// Get returns the admitted value of name, in any letter case, "" when the
// request carries none.
func (s *State) Get(name string) string {
	if s == nil {
		return ""
	}
	for i := range s.pairs {
		if SameName(s.pairs[i].Name, name) {
			return s.pairs[i].Value
		}
	}
	return ""
}

// Drawn returns the canary's draw for the request (gray or not) and
// whether it was drawn yet.
func (s *State) Drawn() (gray, ok bool) {
	if s == nil {
		return false, false
	}
	switch s.drawn.Load() {
	case drawnGray:
		return true, true
	case drawnProd:
		return false, true
	}
	return false, false
}

// Draw records gray as the request's canary draw unless one is recorded
// already, and returns the one in force: every call the request makes,
// through any LoadBalancer, then has the kind of its first draw. A nil
// State records nothing and returns gray.
func (s *State) Draw(gray bool) bool {
	if s == nil {
		return gray
	}
	v := uint32(drawnProd)
	if gray {
		v = drawnGray
	}
	if s.drawn.CompareAndSwap(0, v) {
		return gray
	}
	return s.drawn.Load() == drawnGray
}

// Key is the context key of a State. A context type that keeps the State
// of its parent (package graylb's WithValue contexts) answers Value(Key{})
// with it, without asking its parent.
type Key struct{}

// With returns ctx carrying s. The first With of a State makes the State
// itself that context (a child of ctx that answers Value(Key{}) with s and
// asks ctx for everything else), so that admitting a request costs one
// allocation; a State published already is put on ctx by another context.
func With(ctx context.Context, s *State) context.Context {
	if s != nil && s.parent == nil && ctx != nil {
		s.parent = ctx
		return s
	}
	return context.WithValue(ctx, Key{}, s)
}

// Deadline, Done, Err and Value make a published State the context it was
// published as (see With).

func (s *State) Deadline() (deadline time.Time, ok bool) { return s.parent.Deadline() }
func (s *State) Done() <-chan struct{}                   { return s.parent.Done() }
func (s *State) Err() error                              { return s.parent.Err() }

func (s *State) Value(key any) any {
	if key == (Key{}) {
		return s
	}
	return s.parent.Value(key)
}

// String names the context as context.WithValue's do.
func (s *State) String() string {
	return fmt.Sprintf("%v.WithValue(routestate.Key, %d keys)", s.parent, len(s.pairs))
}

// From returns the state on ctx, nil when there is none.
func From(ctx context.Context) *State {
	if ctx == nil {
		return nil
	}
	s, _ := ctx.Value(Key{}).(*State)
	return s
}

// SameName reports whether lower (a name in lower case) is name in any
// letter case, without converting name; it answers at once when both are
// the same bytes in memory.
func SameName(lower, name string) bool {
	if len(lower) != len(name) {
		return false
	}
	if len(name) == 0 || unsafe.StringData(lower) == unsafe.StringData(name) {
		return true
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != lower[i] {
			return false
		}
	}
	return true
}

// Lower returns s in lower case (ASCII), s itself when it has no upper-case
// letter.
func Lower(s string) string {
	for i := 0; i < len(s); i++ {
		if 'A' <= s[i] && s[i] <= 'Z' {
			b := []byte(s)
			for j := i; j < len(b); j++ {
				if 'A' <= b[j] && b[j] <= 'Z' {
					b[j] += 'a' - 'A'
				}
			}
			return string(b)
		}
	}
	return s
}
