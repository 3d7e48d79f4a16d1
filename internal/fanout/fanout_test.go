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
