package main

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/graylb/graylb"
)

// parsePercent parses a canary percentage the way the rules take it.
func parsePercent(s string) (float64, error) {
	p, err := strconv.ParseFloat(strings.TrimSuffix(s, "%"), 64)
	if err != nil {
		return 0, fmt.Errorf("%q is not a number", s)
	}
	if err := (graylb.Rules{CanaryPercent: p}).Validate(); err != nil {
		return 0, err
	}
	return p, nil
}

// interruptedWrite reports a command interrupted (SIGINT, SIGTERM) during
// its read-modify-write: a write in flight may have landed or not, so the
// rules are read back, on a context the signal does not cancel, and shown.
func interruptedWrite(ctx context.Context, g *globals, e env, st store, err error) int {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), g.timeout)
	defer cancel()
	msg := fmt.Sprintf("interrupted (%v): a write in flight may have landed or not", err)
	if d, rerr := st.get(rctx); rerr != nil {
		msg += fmt.Sprintf("; reading the rules back failed (%v): see graylb rules get", rerr)
	} else if r, perr := parseStored(d); perr != nil {
		msg += fmt.Sprintf("; %s holds rules every client refuses: %v", st.describe(), perr)
	} else {
		msg += fmt.Sprintf("; %s holds canary %v%% (closed: %t, %d gray users): see graylb rules get", st.describe(), r.CanaryPercent, r.Closed, len(r.GrayUsers))
	}
	fmt.Fprintf(e.stderr, "graylb: %s\n", msg)
	return exitSignal
}

func printChange(g *globals, e env, res changeResult) int {
	if g.output == "json" {
		printJSON(e.stdout, res)
		return exitOK
	}
	switch {
	case !res.Changed:
		fmt.Fprintf(e.stdout, "%s: unchanged\n", res.Where)
	case res.DryRun:
		fmt.Fprintf(e.stdout, "%s: would change (dry run, nothing written):\n%s", res.Where, res.Diff)
	default:
		fmt.Fprintf(e.stdout, "%s: written\n%s", res.Where, res.Diff)
	}
	return exitOK
}

func runValidate(_ context.Context, g *globals, e env, args []string) int {
	data, err := readRulesFile(args[0], e.stdin)
	if err == nil {
		_, err = graylb.ParseRules(data)
	}
	if g.output == "json" {
		out := map[string]any{"file": args[0], "valid": err == nil}
		if err != nil {
			out["error"] = err.Error()
		}
		printJSON(e.stdout, out)
	}
	if err != nil {
		if g.output != "json" {
			fmt.Fprintf(e.stderr, "%s: %v\n", args[0], err)
		}
		return exitFailed
	}
	if g.output != "json" {
		fmt.Fprintf(e.stdout, "%s: valid\n", args[0])
	}
	return exitOK
}

func runGet(ctx context.Context, g *globals, e env, _ []string) int {
	st, err := g.openStore(e)
	if err != nil {
		return fail(e, err)
	}
	defer st.close()
	d, err := st.get(ctx)
	if err != nil {
		return fail(e, err)
	}
	rules, perr := parseStored(d)
	if g.output == "json" {
		out := map[string]any{"where": st.describe(), "exists": d.exists, "document": string(d.data), "valid": perr == nil}
		if perr == nil {
			out["rules"] = rules
		} else {
			out["error"] = perr.Error()
		}
		printJSON(e.stdout, out)
	} else {
		if !d.exists {
			fmt.Fprintf(e.stderr, "%s: no rules stored\n", st.describe())
		}
		e.stdout.Write(d.data)
		if len(d.data) > 0 && d.data[len(d.data)-1] != '\n' {
			fmt.Fprintln(e.stdout)
		}
	}
	if perr != nil {
		fmt.Fprintf(e.stderr, "graylb: the stored document is refused by every client: %v\n", perr)
		return exitFailed
	}
	return exitOK
}

func runDiff(ctx context.Context, g *globals, e env, args []string) int {
	data, err := readRulesFile(args[0], e.stdin)
	if err == nil {
		_, err = graylb.ParseRules(data)
	}
	if err != nil {
		fmt.Fprintf(e.stderr, "%s: %v\n", args[0], err)
		return exitUsage
	}
	st, err := g.openStore(e)
	if err != nil {
		fmt.Fprintf(e.stderr, "graylb: %v\n", err)
		return exitUsage
	}
	defer st.close()
	d, err := st.get(ctx)
	if err != nil {
		fmt.Fprintf(e.stderr, "graylb: %v\n", err)
		return exitUsage
	}
	diff := diffDocs(d.data, data)
	if g.output == "json" {
		printJSON(e.stdout, map[string]any{"where": st.describe(), "diff": diff, "equal": diff == ""})
	} else {
		fmt.Fprint(e.stdout, diff)
	}
	if diff != "" {
		return exitFailed
	}
	return exitOK
}

func runApply(ctx context.Context, g *globals, e env, args []string, dryRun bool) int {
	data, err := readRulesFile(args[0], e.stdin)
	if err != nil {
		return fail(e, err)
	}
	after, err := graylb.ParseRules(data)
	if err != nil {
		return fail(e, fmt.Errorf("%s: %w (nothing written)", args[0], err))
	}
	st, err := g.openStore(e)
	if err != nil {
		return fail(e, err)
	}
	defer st.close()
	cur, err := st.get(ctx)
	if err != nil {
		return fail(e, err)
	}
	before, _ := parseStored(cur) // an invalid stored document is what apply repairs
	res := changeResult{Where: st.describe(), Before: before, After: after, Diff: diffDocs(cur.data, data), DryRun: dryRun, Attempts: 1}
	res.Changed = res.Diff != "" || !cur.exists
	if res.Changed && !dryRun {
		if err := st.put(ctx, cur, data); err != nil {
			if ctx.Err() != nil {
				return interruptedWrite(ctx, g, e, st, err)
			}
			if errors.Is(err, errConflict) {
				err = fmt.Errorf("%w; run the command again to see the diff from the new document", err)
			}
			return fail(e, err)
		}
		// Verified: the document read back is the one written (a store
		// without compare-and-set may have let a concurrent write in).
		back, err := readBack(ctx, st)
		if err != nil {
			if ctx.Err() != nil {
				return interruptedWrite(ctx, g, e, st, err)
			}
			return fail(e, err)
		}
		if got, err := parseStored(back); err != nil || !equivalentRules(got, after) {
			return fail(e, fmt.Errorf("%w; %s; run the command again to see the diff from it", errOverwritten, whatIsStored(ctx, st)))
		}
	}
	return printChange(g, e, res)
}
