package fanout

import (
	"sync"
	"testing"
)

func TestSet(t *testing.T) {
	var s Set[func(int)]
	if s.Len() != 0 || s.Snapshot() != nil {
		t.Fatal("zero Set is not empty")
	}
	var got []int
	r1 := s.Add(func(v int) { got = append(got, 10+v) })
	r2 := s.Add(func(v int) { got = append(got, 20+v) })
	for _, fn := range s.Snapshot() {
		fn(1)
	}
	if len(got) != 2 || got[0] != 11 || got[1] != 21 {
		t.Fatalf("delivery in the order added: %v", got)
	}
	r1()
	r1() // twice is harmless
	if s.Len() != 1 {
		t.Fatalf("Len after remove: %d", s.Len())
	}
	r2()
	s.Add(func(int) {})
	s.Clear()
	if s.Len() != 0 {
		t.Fatal("Clear left watchers")
	}
}

func TestSet_Concurrent(t *testing.T) {
	var s Set[func()]
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 200; i++ {
				remove := s.Add(func() {})
				_ = s.Snapshot()
				remove()
			}
		}()
	}
	wg.Wait()
	if s.Len() != 0 {
		t.Fatalf("%d watchers left", s.Len())
	}
}

func TestSet_RemoveByID(t *testing.T) {
	var s Set[func() int]
	a := s.AddID(func() int { return 1 })
	b := s.AddID(func() int { return 2 })
	c := s.AddID(func() int { return 3 })
	if !s.Remove(b) || s.Remove(b) {
		t.Fatal("Remove reports true once, then false")
	}
	var got []int
	for _, fn := range s.Snapshot() {
		got = append(got, fn())
	}
	if len(got) != 2 || got[0] != 1 || got[1] != 3 {
		t.Fatalf("the others keep their order: %v", got)
	}
	s.Clear()
	if s.Remove(a) || s.Remove(c) {
		t.Fatal("Remove after Clear found a watcher")
	}
}
