package main

import (
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
)

// Sides of a comparison: the two workers, and the yardsticks some rows are
// measured against.
const (
	sideGo    = "daytona-worker"
	sideNode  = "Node plugin"
	sideFloor = "trivial Go binary"
	// sideLibFloor is the trivial Go binary with every package the worker
	// imports linked in (cmd/bench-compare/floor built with -tags libfloor).
	sideLibFloor = "trivial Go binary with the worker's imports"
	// sideHTTPFloor is the trivial Go binary with net/http linked in
	// (cmd/bench-compare/floor built with -tags httpfloor).
	sideHTTPFloor = "trivial Go binary linking net/http"
	sideDirect    = "our client, no worker"
)

// row is one measured quantity; samples holds each side's values, one per
// run, in run order (runs alternate the sides, so sample i of two sides
// were taken at about the same moment).
type row struct {
	scenario, metric, unit string
	samples                map[string][]float64
}

// table collects rows in the order they are first measured.
type table struct {
	rows []*row
}

func (t *table) add(scenario, metric, unit, side string, v float64) {
	for _, r := range t.rows {
		if r.scenario == scenario && r.metric == metric {
			r.samples[side] = append(r.samples[side], v)
			return
		}
	}
	t.rows = append(t.rows, &row{scenario: scenario, metric: metric, unit: unit, samples: map[string][]float64{side: {v}}})
}

// print writes the table as Markdown: min / median / max per side, and the
// ratio of daytona-worker to the Node plugin (or to the yardstick the row
// has), the median of the ratios of runs taken side by side.
func (t *table) print(w io.Writer) {
	fmt.Fprintln(w, "| scenario | metric | daytona-worker (min / median / max) | Node plugin (min / median / max) | daytona-worker ÷ Node |")
	fmt.Fprintln(w, "|---|---|---|---|---|")
	for _, r := range t.rows {
		goVals, nodeVals := r.samples[sideGo], r.samples[sideNode]
		if r.unit == unitYesNo {
			fmt.Fprintf(w, "| %s | %s | %s | %s |  |\n", r.scenario, r.metric, yesCount(goVals), yesCount(nodeVals))
			continue
		}
		if len(goVals) > 0 || len(nodeVals) > 0 {
			fmt.Fprintf(w, "| %s | %s | %s | %s | %s |\n", r.scenario, r.metric+unitSuffix(r.unit),
				spread(goVals), spread(nodeVals), pairedRatio(goVals, nodeVals))
		}
		for _, yard := range []string{sideFloor, sideHTTPFloor, sideLibFloor, sideDirect} {
			if vals := r.samples[yard]; len(vals) > 0 {
				fmt.Fprintf(w, "| %s | %s, %s | %s |  | daytona-worker ÷ %s: %s |\n", r.scenario, r.metric+unitSuffix(r.unit), yard,
					spread(vals), yard, pairedRatio(goVals, vals))
			}
		}
	}
}

// unitYesNo marks a row of checks (1 passed, 0 failed), printed as how
// many runs passed.
const unitYesNo = "yes/no"

func yesCount(vals []float64) string {
	if len(vals) == 0 {
		return "—"
	}
	yes := 0
	for _, v := range vals {
		if v != 0 {
			yes++
		}
	}
	return fmt.Sprintf("%d of %d runs", yes, len(vals))
}

func unitSuffix(unit string) string {
	if unit == "" {
		return ""
	}
	return " (" + unit + ")"
}

// spread formats min / median / max.
func spread(vals []float64) string {
	if len(vals) == 0 {
		return "—"
	}
	s := slices.Clone(vals)
	slices.Sort(s)
	return fmt.Sprintf("%s / %s / %s", num(s[0]), num(median(s)), num(s[len(s)-1]))
}

func median(sorted []float64) float64 {
	n := len(sorted)
	if n%2 == 1 {
		return sorted[n/2]
	}
	return (sorted[n/2-1] + sorted[n/2]) / 2
}

// pairedRatio is the median of a[i]/b[i] when both sides have a sample
// for every run, else the ratio of their medians.
func pairedRatio(a, b []float64) string {
	if len(a) == 0 || len(b) == 0 {
		return "—"
	}
	var ratios []float64
	if len(a) == len(b) {
		for i := range a {
			if b[i] != 0 {
				ratios = append(ratios, a[i]/b[i])
			}
		}
	}
	if len(ratios) != len(a) {
		sa, sb := slices.Clone(a), slices.Clone(b)
		slices.Sort(sa)
		slices.Sort(sb)
		if median(sb) == 0 {
			return "—"
		}
		return num(median(sa)/median(sb)) + "×"
	}
	slices.Sort(ratios)
	return num(median(ratios)) + "×"
}

// num prints three significant digits, without exponent for everyday sizes.
func num(v float64) string {
	switch {
	case math.IsNaN(v) || math.IsInf(v, 0):
		return "—"
	case v == 0:
		return "0"
	case math.Abs(v) >= 100:
		return fmt.Sprintf("%.0f", v)
	case math.Abs(v) >= 10:
		return fmt.Sprintf("%.1f", v)
	case math.Abs(v) >= 1:
		return fmt.Sprintf("%.2f", v)
	}
	s := fmt.Sprintf("%.3g", v)
	return strings.TrimSuffix(s, ".000")
}
