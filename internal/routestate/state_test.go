package routestate

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestGetIsCaseInsensitive(t *testing.T) {
	s := New([]Pair{{"gray", "true"}, {"x-lane", "blue"}}, false)
	for name, want := range map[string]string{"gray": "true", "GRAY": "true", "Gray": "true", "X-Lane": "blue", "lane": "", "": ""} {
		if got := s.Get(name); got != want {
			t.Errorf("Get(%q) = %q, want %q", name, got, want)
		}
	}
	if got := s.ValueSlice(1); len(got) != 1 || cap(got) != 1 || got[0] != "blue" {
		t.Errorf("ValueSlice(1) = %q (cap %d), want [blue] with no room to append into", got, cap(got))
	}
	var none *State
	if none.Get("gray") != "" || none.IsUntrusted() || none.Pairs() != nil {
		t.Error("a nil State has no pairs and trusts its caller")
	}
	if g, ok := none.Drawn(); ok || g {
		t.Error("a nil State has drawn nothing")
	}
}

// An untrusted caller's state keeps nothing a trusting server side
// admitted before (a program marking the caller untrusted afterwards).
func TestUntrustedDropsPairs(t *testing.T) {
	s := New([]Pair{{"uid", "alice"}}, false)
	u := s.Untrusted()
	if !u.IsUntrusted() || s.IsUntrusted() || u.Get("uid") != "" || len(u.Pairs()) != 0 {
		t.Errorf("Untrusted: %v %v %q", u.IsUntrusted(), s.IsUntrusted(), u.Get("uid"))
	}
	if u.Untrusted() != u {
		t.Error("an untrusted State without pairs is its own Untrusted")
	}
	if !(*State)(nil).Untrusted().IsUntrusted() {
		t.Error("nil.Untrusted is untrusted")
	}
}

// The first draw recorded wins, whatever races with it.
func TestDrawFirstWins(t *testing.T) {
	s := New(nil, false)
	var wg sync.WaitGroup
	got := make([]bool, 64)
	for i := range got {
		wg.Add(1)
		go func() {
			defer wg.Done()
			got[i] = s.Draw(i%2 == 0)
		}()
	}
	wg.Wait()
	d, ok := s.Drawn()
	if !ok {
		t.Fatal("no draw recorded")
	}
	for i, g := range got {
		if g != d {
			t.Fatalf("call %d got %v, the draw in force is %v", i, g, d)
		}
	}
}

func TestFromAndWith(t *testing.T) {
	var none context.Context // a nil Context: a caller that passed none
	if From(none) != nil || From(context.Background()) != nil {
		t.Error("no state on a context without one")
	}
	s := New(nil, true)
	if From(With(context.Background(), s)) != s {
		t.Error("With then From")
	}
}

// SameName(Lower(a), b) is ASCII case folding, whatever bytes a caller
// sends (invalid UTF-8, non-ASCII letters that strings.EqualFold would
// fold are not folded).
func FuzzSameName(f *testing.F) {
	for _, s := range [][2]string{{"gray", "GRAY"}, {"x-lane", "X-Lane"}, {"", ""}, {"k", "K\x00"}, {"ſ", "s"}, {"\xff", "\xdf"}} {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, a, b string) {
		want := len(a) == len(b)
		for i := 0; want && i < len(a); i++ {
			x, y := a[i], b[i]
			if 'A' <= x && x <= 'Z' {
				x += 'a' - 'A'
			}
			if 'A' <= y && y <= 'Z' {
				y += 'a' - 'A'
			}
			want = x == y
		}
		if got := SameName(Lower(a), b); got != want {
			t.Errorf("SameName(Lower(%q), %q) = %v, want %v", a, b, got, want)
		}
		if l := Lower(a); len(l) != len(a) || strings.ContainsAny(l, "ABCDEFGHIJKLMNOPQRSTUVWXYZ") {
			t.Errorf("Lower(%q) = %q", a, l)
		}
	})
}

// TestWith_StateIsTheContext: a State published by With is a context that
// carries it and behaves as its parent for everything else (deadline,
// cancellation, other values), in one allocation with New; a State
// published again goes on the new context by another one.
func TestWith_StateIsTheContext(t *testing.T) {
	type other struct{}
	parent, cancel := context.WithTimeout(context.WithValue(context.Background(), other{}, "v"), time.Hour)
	s := New([]Pair{{Name: "gray", Value: "true"}}, false)
	ctx := With(parent, s)
	if From(ctx) != s || ctx.Value(other{}) != "v" {
		t.Fatalf("values: state %p want %p, other %v", From(ctx), s, ctx.Value(other{}))
	}
	pd, _ := parent.Deadline()
	if d, ok := ctx.Deadline(); !ok || !d.Equal(pd) {
		t.Fatalf("deadline %v %v, want %v", d, ok, pd)
	}
	child, stop := context.WithCancel(ctx)
	defer stop()
	again := With(context.Background(), s)
	if From(again) != s || again.Value(other{}) != nil {
		t.Fatal("a State published again did not go on the new context alone")
	}
	cancel()
	select {
	case <-child.Done():
	case <-time.After(time.Second):
		t.Fatal("cancelling the parent did not reach a child of the State's context")
	}
	if ctx.Err() != context.Canceled || again.Err() != nil {
		t.Fatalf("Err: %v, %v", ctx.Err(), again.Err())
	}
	bg := context.Background()
	if n := testing.AllocsPerRun(100, func() { _ = With(bg, New([]Pair{{Name: "gray", Value: "true"}}, false)) }); n != 1 {
		t.Fatalf("New and With: %v allocations, want 1", n)
	}
}
