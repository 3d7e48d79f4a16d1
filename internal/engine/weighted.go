package engine

import (
	"unsafe"

	"github.com/graylb/graylb/internal/cacheline"
	"github.com/graylb/graylb/internal/rotor"
	"github.com/graylb/graylb/internal/wrr"
)

// weighted is WeightedRoundRobin's picker: a schedule (see package wrr)
// walked by one rotor.Turns, from a random start on every level.
type weighted struct {
	weightedFields
	_ [cacheline.Size - unsafe.Sizeof(weightedFields{})%cacheline.Size]byte // whole cache lines (see package cacheline)
}

// weightedFields are the fields of a weighted, which pads them to whole cache
// lines.
type weightedFields struct {
	s wrr.Schedule
	t rotor.Turns
}

func (p *weighted) Next() int { return p.s.At(p.t.Next(p.s.Span())) }

// newWeighted builds the schedule of list's weights (see wrr.New).
func newWeighted(list []Instance) Picker {
	p := &weighted{weightedFields: weightedFields{s: wrr.New(len(list), func(i int) float64 { return list[i].Weight })}}
	if len(list) > 0 {
		p.t.Init(p.s.Span())
	}
	return p
}
