package debugpage

import (
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/graylb/graylb"
	"github.com/graylb/graylb/shadow"
)

// ShownBody is how many bytes of each answer's body the page shows of a
// difference (the mirror keeps up to its own bound, 64 KiB by default).
const ShownBody = 2048

// ShadowState is the dark launch as the page shows it: the rules' share
// of prod requests mirrored to the gray build and the last copies whose
// answers differed from prod's (shadow.Diffs), newest first.
type ShadowState struct {
	Percent float64      `json:"percent"`
	Diffs   []ShadowDiff `json:"diffs"`
}

// ShadowDiff is one copy whose answer differed: how, and both answers.
type ShadowDiff struct {
	Service string      `json:"service"`
	Route   string      `json:"route"`
	At      time.Time   `json:"at"`
	Status  bool        `json:"status"`  // the statuses differed
	Latency bool        `json:"latency"` // the copy took longer than the mirror allows
	Body    bool        `json:"body"`    // the bodies differed (Paths: where, for JSON)
	Paths   []string    `json:"paths,omitempty"`
	Primary ShownAnswer `json:"primary"` // prod's answer, the one returned
	Copy    ShownAnswer `json:"copy"`    // the gray build's, discarded
}

// ShownAnswer is one answer of a difference. The body is text cut at
// ShownBody bytes, invalid UTF-8 and control characters (but newlines and
// tabs) replaced by U+FFFD; the page escapes it like every value. No
// header is kept or shown: headers can carry credentials.
type ShownAnswer struct {
	Status    int     `json:"status"`
	LatencyMs float64 `json:"latencyMs"`
	Body      string  `json:"body"`
	BodyBytes int     `json:"bodyBytes"` // the body's length as the mirror kept it
	Cut       bool    `json:"cut"`       // Body is its first ShownBody bytes
	// NotKept: the body was longer than the mirror keeps (compared by
	// status and latency alone).
	NotKept bool   `json:"notKept,omitempty"`
	Err     string `json:"err,omitempty"`
}

// shadowState returns the dark launch's state of lb now.
func shadowState(lb *graylb.LoadBalancer) ShadowState {
	diffs := shadow.Diffs(lb)
	st := ShadowState{Percent: shadow.Percent(lb), Diffs: make([]ShadowDiff, 0, len(diffs))}
	for i := len(diffs) - 1; i >= 0; i-- {
		e := diffs[i]
		st.Diffs = append(st.Diffs, ShadowDiff{Service: e.Service, Route: e.Route, At: e.At,
			Status: e.Status, Latency: e.Latency, Body: e.Body, Paths: e.Paths,
			Primary: shown(e.Primary), Copy: shown(e.Copy)})
	}
	return st
}

func shown(a *shadow.Answer) ShownAnswer {
	if a == nil {
		return ShownAnswer{Err: "no answer"}
	}
	s := ShownAnswer{Status: a.Status, LatencyMs: float64(a.Latency) / float64(time.Millisecond), Err: a.Err,
		BodyBytes: len(a.Body), NotKept: a.Body == nil && a.Err == ""}
	b := a.Body
	if len(b) > ShownBody {
		b, s.Cut = b[:ShownBody], true
		// A cut inside a rune ends before it.
		for i := 1; i <= utf8.UTFMax && i <= len(b); i++ {
			if utf8.RuneStart(b[len(b)-i]) {
				if !utf8.FullRune(b[len(b)-i:]) {
					b = b[:len(b)-i]
				}
				break
			}
		}
	}
	s.Body = strings.Map(func(r rune) rune {
		if r == '\n' || r == '\t' || !unicode.IsControl(r) {
			return r
		}
		return utf8.RuneError
	}, strings.ToValidUTF8(string(b), string(utf8.RuneError)))
	return s
}
