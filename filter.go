package graylb

import "github.com/graylb/graylb/internal/engine"

// ServerFilter is a filter of the candidates a request may reach, run
// after the gray decision (WithFilters):
//
//	Order() int                             // filters run in ascending Order
//	Build(in filter.BuildInfo) filter.Stage // once per instance-list or rules change
//
// Package filter has the ready-made filters (Version, Partition) and what
// one of your own is written against.
type ServerFilter = engine.ServerFilter
