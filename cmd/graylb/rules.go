package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"

	"github.com/graylb/graylb"
)

// readRulesFile reads a rule document from path ("-": standard input),
// refusing more than graylb.MaxRulesSize bytes without reading them all.
func readRulesFile(path string, stdin io.Reader) ([]byte, error) {
	var r io.Reader
	if path == "-" {
		r = stdin
	} else {
		f, err := os.Open(path)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		r = f
	}
	data, err := io.ReadAll(io.LimitReader(r, graylb.MaxRulesSize+1))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if len(data) > graylb.MaxRulesSize {
		return nil, fmt.Errorf("%s: %w: more than %d bytes", path, graylb.ErrInvalidRules, graylb.MaxRulesSize)
	}
	return data, nil
}

// parseStored parses what a store holds: no document is the zero Rules,
// as every client reads it (the three-key layout always has a document:
// the rules its keys make, missing keys included).
func parseStored(d document) (graylb.Rules, error) {
	if len(bytes.TrimSpace(d.data)) == 0 {
		return graylb.Rules{}, nil
	}
	return graylb.ParseRules(d.data)
}

// encodeRules writes r as the document the shortcuts store: indented
// JSON, checked by graylb.ParseRules as every client will check it.
func encodeRules(r graylb.Rules) ([]byte, error) {
	data, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return nil, err
	}
	data = append(data, '\n')
	if _, err := graylb.ParseRules(data); err != nil {
		return nil, err
	}
	return data, nil
}

// maxCASAttempts bounds a shortcut's read-modify-write retries after
// conflicts.
const maxCASAttempts = 3

// changeResult is what a write did.
type changeResult struct {
	Where     string       `json:"where"`
	Changed   bool         `json:"changed"`
	Before    graylb.Rules `json:"before"`
	After     graylb.Rules `json:"after"`
	Diff      string       `json:"diff,omitempty"`
	DryRun    bool         `json:"dryRun,omitempty"`
	Attempts  int          `json:"attempts"`
	Documents struct {
		Before string `json:"before"`
		After  string `json:"after"`
	} `json:"-"`
}

// modify reads the rules, applies fn and writes the result with
// compare-and-set; after a conflict it reads again and applies fn to
// what it finds, up to maxCASAttempts times. A stored document that does
// not parse is never modified: fix it with rules apply.
func modify(ctx context.Context, st store, dryRun bool, fn func(*graylb.Rules) error) (changeResult, error) {
	return modifyOver(ctx, st, dryRun, fn, false)
}

// closeRules is the rollback lever (closed: true) as a read-modify-write,
// which also works over a stored document every client refuses: the
// clients keep the rules they had (a canary included), so closing matters
// most then. Such a document is replaced by the closed rules alone (the
// diff shows the text replaced).
func closeRules(ctx context.Context, st store, dryRun bool) (changeResult, error) {
	return modifyOver(ctx, st, dryRun, setClosed(true), true)
}

// modifyOver is modify; with replaceInvalid a stored document that does
// not parse is taken as the zero Rules and replaced.
func modifyOver(ctx context.Context, st store, dryRun bool, fn func(*graylb.Rules) error, replaceInvalid bool) (changeResult, error) {
	res := changeResult{Where: st.describe(), DryRun: dryRun}
	var conflict error // the last attempt's, which may carry the server's answer
	for res.Attempts < maxCASAttempts {
		res.Attempts++
		cur, err := st.get(ctx)
		if err != nil {
			return res, err
		}
		before, err := parseStored(cur)
		invalid := err != nil
		if invalid && !replaceInvalid {
			return res, fmt.Errorf("the stored rules do not parse, so they are not modified (every client refuses them too; fix them with rules apply): %w", err)
		}
		after := cloneRules(before)
		if err := fn(&after); err != nil {
			return res, err
		}
		data, err := encodeRules(after)
		if err != nil {
			return res, err
		}
		res.Before, res.After = before, after
		res.Diff = diffDocs(cur.data, data)
		res.Changed = invalid || !sameRules(before, after)
		if !res.Changed || dryRun {
			return res, nil
		}
		err = st.put(ctx, cur, data)
		if errors.Is(err, errConflict) {
			conflict = err
			continue
		}
		return res, err
	}
	return res, fmt.Errorf("%d times in a row: %w", maxCASAttempts, conflict)
}

func cloneRules(r graylb.Rules) graylb.Rules {
	out := r
	if r.Enabled != nil {
		v := *r.Enabled
		out.Enabled = &v
	}
	out.GrayUsers = slices.Clone(r.GrayUsers)
	out.GrayAddresses = slices.Clone(r.GrayAddresses)
	out.Matches = slices.Clone(r.Matches)
	return out
}

func sameRules(a, b graylb.Rules) bool {
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	return bytes.Equal(ja, jb)
}

// setCanary is the canary shortcut.
func setCanary(p float64) func(*graylb.Rules) error {
	return func(r *graylb.Rules) error {
		r.CanaryPercent = p
		return nil
	}
}

// addUsers adds ids to the gray users, each once, keeping the order.
func addUsers(ids []string) func(*graylb.Rules) error {
	return func(r *graylb.Rules) error {
		for _, id := range ids {
			if !slices.Contains(r.GrayUsers, id) {
				r.GrayUsers = append(r.GrayUsers, id)
			}
		}
		return nil
	}
}

// removeUsers removes ids from the gray users; an id not there is no
// error (the end state is what was asked).
func removeUsers(ids []string) func(*graylb.Rules) error {
	return func(r *graylb.Rules) error {
		r.GrayUsers = slices.DeleteFunc(r.GrayUsers, func(u string) bool { return slices.Contains(ids, u) })
		if len(r.GrayUsers) == 0 {
			r.GrayUsers = nil
		}
		return nil
	}
}

// setClosed is rollback (true) and resume (false).
func setClosed(closed bool) func(*graylb.Rules) error {
	return func(r *graylb.Rules) error {
		r.Closed = closed
		return nil
	}
}
