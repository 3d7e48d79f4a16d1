package debugpage

import (
	"bytes"
	"encoding/json"
)

// WithSection adds a section to the page: state is called at each request
// and what it returns is shown as JSON under name, after the LoadBalancer's
// own state (in the page, and in State.Sections). Sections are shown in
// the order given; a nil state is ignored. Use it for what lives beside
// the LoadBalancer, a kafkagray Link's consumers for example:
//
//	debugpage.WithSection("kafka consumer", func() any { return link.State() })
//
// state runs on the request's goroutine: it must be safe for concurrent
// use and should be quick. What it returns is escaped like everything on
// the page; a value that does not encode as JSON is shown as its error.
func WithSection(name string, state func() any) Option {
	return func(h *handler) {
		if state != nil {
			h.sections = append(h.sections, section{name: name, state: state})
		}
	}
}

type section struct {
	name  string
	state func() any
}

// Section is one WithSection's value at one request.
type Section struct {
	Name  string          `json:"name"`
	Value json.RawMessage `json:"value,omitempty"`
	Error string          `json:"error,omitempty"` // why the value did not encode as JSON
}

// sectionStates returns the sections' values now.
func (h *handler) sectionStates() []Section {
	if len(h.sections) == 0 {
		return nil
	}
	out := make([]Section, 0, len(h.sections))
	for _, s := range h.sections {
		var b bytes.Buffer
		enc := json.NewEncoder(&b)
		enc.SetIndent("", "  ")
		enc.SetEscapeHTML(false) // the page escapes it; the text stays readable there
		if err := enc.Encode(s.state()); err != nil {
			out = append(out, Section{Name: s.name, Error: err.Error()})
			continue
		}
		out = append(out, Section{Name: s.name, Value: bytes.TrimRight(b.Bytes(), "\n")})
	}
	return out
}
