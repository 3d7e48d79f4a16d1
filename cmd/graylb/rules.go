package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"slices"
	"time"

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

// maxCASAttempts bounds a shortcut's read-modify-write attempts: after a
// conflict, or a read-back that shows the write overwritten, it reads
// again, applies its change to what it finds (a merge: the change is
// applied to the other writer's rules) and writes again.
const maxCASAttempts = 8

// retryBackoff is the bound of the random wait before attempt n (n ≥ 2):
// writers that keep meeting each other spread out.
func retryBackoff(n int) time.Duration { return time.Duration(n-1) * 100 * time.Millisecond }

// errOverwritten: the read-back after a write found rules without the
// change: another writer replaced the document after this write landed.
var errOverwritten = errors.New("read back after the write, the store no longer holds the change (another writer replaced the document)")

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
//
// Every write is verified: after the store's settle time the document is
// read back, and the write counts only when applying fn to what is stored
// changes nothing (the change holds, whoever wrote since). Otherwise the
// change is applied again to what is stored, up to maxCASAttempts times;
// then it fails, saying what the store holds. It never returns a change
// as written that the read-back did not show.
func modifyOver(ctx context.Context, st store, dryRun bool, fn func(*graylb.Rules) error, replaceInvalid bool) (changeResult, error) {
	res := changeResult{Where: st.describe(), DryRun: dryRun}
	var conflict error // the last attempt's, which may carry the server's answer
	for res.Attempts < maxCASAttempts {
		res.Attempts++
		if res.Attempts > 1 {
			if err := sleepCtx(ctx, rand.N(retryBackoff(res.Attempts))); err != nil {
				return res, err
			}
		}
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
		if err != nil {
			return res, err
		}
		back, err := readBack(ctx, st)
		if err != nil {
			return res, err
		}
		if holds(back, fn) {
			return res, nil
		}
		conflict = errOverwritten
	}
	return res, fmt.Errorf("%d attempts in a row: %w; %s", maxCASAttempts, conflict, whatIsStored(ctx, st))
}

// readBack waits the store's settle time and reads the document back, for
// a write's verification.
func readBack(ctx context.Context, st store) (document, error) {
	if err := sleepCtx(ctx, st.settle()); err != nil {
		return document{}, fmt.Errorf("written, but interrupted before reading it back: %w", err)
	}
	d, err := st.get(ctx)
	if err != nil {
		return d, fmt.Errorf("written, but reading it back failed, so whether it holds is unknown: %w", err)
	}
	return d, nil
}

// holds reports whether the change fn makes is in d: applying it changes
// nothing.
func holds(d document, fn func(*graylb.Rules) error) bool {
	r, err := parseStored(d)
	if err != nil {
		return false
	}
	again := cloneRules(r)
	return fn(&again) == nil && sameRules(r, again)
}

// whatIsStored says what the store holds now, for an error.
func whatIsStored(ctx context.Context, st store) string {
	d, err := st.get(ctx)
	if err != nil {
		return fmt.Sprintf("reading what %s holds failed: %v", st.describe(), err)
	}
	r, err := parseStored(d)
	if err != nil {
		return fmt.Sprintf("%s holds rules every client refuses: %v", st.describe(), err)
	}
	msg := fmt.Sprintf("%s holds: %s", st.describe(), rulesSummary(r))
	var buf bytes.Buffer
	if json.Compact(&buf, d.data) == nil && buf.Len() <= 400 {
		msg += " (" + buf.String() + ")"
	}
	return msg
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

// equivalentRules reports whether a and b route the same: sameRules, with
// enabled absent taken as true and empty lists as none (the three-key
// Redis layout always stores the switch).
func equivalentRules(a, b graylb.Rules) bool {
	norm := func(r graylb.Rules) graylb.Rules {
		r = cloneRules(r)
		if r.Enabled == nil {
			on := true
			r.Enabled = &on
		}
		for _, l := range []*[]string{&r.GrayUsers, &r.GrayAddresses} {
			if len(*l) == 0 {
				*l = nil
			}
		}
		if len(r.Matches) == 0 {
			r.Matches = nil
		}
		return r
	}
	return sameRules(norm(a), norm(b))
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
