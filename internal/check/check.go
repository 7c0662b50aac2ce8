// Package check judges a recorded history (internal/history, Elle's JSON-lines format) against a
// transactional consistency model and explains every anomaly it finds with a cycle a person can
// follow.
//
// The approach is Elle's (Kingsbury & Alvaro, VLDB 2020): infer each key's version order from
// list-append reads (every read is a prefix of the one true order) or, for read-write registers,
// from the writes that follow reads; derive Adya's dependency edges (ww, wr, rw) plus session
// (process) and real-time order; then look for the cycles each model forbids. Real-time order is
// built with a chain of barrier nodes (notes/rls.md §5.2) so it costs O(n) edges, and cycles are
// found with Tarjan's SCC followed by a breadth-first search inside each component.
//
// Each model is defined by the cycles it forbids; see models.go for the definitions and their
// sources.
package check

import (
	"fmt"
	"sort"
	"strings"

	"github.com/meridiandb/meridian/internal/history"
)

// Verdicts.
const (
	Valid   = "valid"
	Invalid = "invalid"
	Unknown = "unknown"
)

// Report is the checker's judgement of one history under one model.
type Report struct {
	Model     string    `json:"model"`
	Verdict   string    `json:"verdict"`
	Anomalies []Anomaly `json:"anomalies"`
	// AnomalyTypes lists the distinct anomaly types found, sorted, and AnomalyCounts how many of
	// each, those not listed included.
	AnomalyTypes  []string       `json:"anomaly_types"`
	AnomalyCounts map[string]int `json:"anomaly_counts,omitempty"`
	// Omitted counts anomalies found but not listed (the list is capped to keep reports readable).
	Omitted int    `json:"omitted,omitempty"`
	Counts  Counts `json:"counts"`
	// Notes say what the checker assumed or could not do (e.g. missing key regions).
	Notes []string `json:"notes,omitempty"`
}

// Counts summarises the history.
type Counts struct {
	OK   int `json:"ok"`
	Fail int `json:"fail"`
	Info int `json:"info"`
	// Edges is the size of the dependency graph the model was checked on (real-time barriers
	// included).
	Edges int `json:"edges"`
	// Timestamped counts the committed transactions held to their commit timestamps (a
	// history that declares timestamp order, tsorder.go).
	Timestamped int `json:"timestamped,omitempty"`
}

// Anomaly is one violation. Cycle anomalies carry the cycle; direct ones (aborted read, lost
// update, ...) name the transactions involved.
type Anomaly struct {
	Type        string  `json:"type"`
	Explanation string  `json:"explanation"`
	Cycle       []Edge  `json:"cycle,omitempty"`
	Txns        []int64 `json:"txns,omitempty"`
	Key         *int64  `json:"key,omitempty"`
}

// Edge is one step of a cycle: From must precede To in any order the model accepts, because of
// Explanation. From and To are transaction ids (the index of the transaction's invoke line).
type Edge struct {
	From        int64  `json:"from"`
	To          int64  `json:"to"`
	Type        string `json:"type"` // ww, wr, rw, process, realtime
	Key         *int64 `json:"key,omitempty"`
	Explanation string `json:"explanation"`
}

// maxAnomalies caps the anomalies listed in a report; the rest are counted in Omitted.
const maxAnomalies = 200

// searchBudget bounds the edges visited by the cycle searches that are not linear (a cycle with
// exactly one rw edge, the causal pattern). When it runs out with nothing found the verdict is
// unknown rather than a silent pass.
const searchBudget = 50_000_000

// Check judges ops (a history as read by history.Read or produced by a history.Recorder) under
// model, one of Models(). A structurally broken history (a completion without an invocation, or
// whose micro-ops are not its invocation's, a key used both as a list and as a register, ...) is an
// error; consistency violations are anomalies in the report. Some operations with a time and
// some without (history.Op.Untimed) is an error too. With none, the history has no real-time
// order: a model that needs it is judged without it, so it can be found invalid but never valid
// (the verdict is unknown, with a note saying why).
func Check(ops []history.Op, model string) (*Report, error) {
	m, ok := modelByName[model]
	if !ok {
		return nil, fmt.Errorf("check: unknown model %q (want one of %s)", model, strings.Join(Models(), ", "))
	}
	h, err := build(ops)
	if err != nil {
		return nil, err
	}
	c := &checker{h: h, m: m, budget: searchBudget}
	if h.untimed && m.kinds&kRT != 0 {
		c.m, c.rtUnchecked = m.withoutRealtime(), true
		c.notes = append(c.notes, fmt.Sprintf("the history has no times, so the real-time order %s needs was not checked (models that need none: %s)",
			m.name, strings.Join(untimedModels(), ", ")))
	}
	c.run()
	return c.report(), nil
}

// checker holds one run's state.
type checker struct {
	h *hist
	m *model
	v *versions
	g *graph
	// comp is each graph node's strongly connected component; loc maps the nodes of the
	// component being searched to their local index (-1 otherwise).
	comp   []int32
	loc    []int32
	budget int
	// incomplete is set when a search ran out of budget.
	incomplete bool
	nilCapped  bool
	rtCapped   bool
	// edgesDropped: rw edges were left out to bound the graph where nothing else reaches their
	// targets, so a cycle may be hidden: the verdict is at best unknown.
	edgesDropped bool
	// rtUnchecked is set when the model needs real-time order and the history has no times: m
	// is then the model without it.
	rtUnchecked bool
	anomalies   []Anomaly
	omitted     int            // anomalies found past maxAnomalies, counted only
	types       map[string]int // how many anomalies of each type were found, listed or not
	timestamped int            // committed transactions held to their commit timestamps
	notes       []string
	// timelines caches each register key's writers in real-time order (see realtimeSuccessors).
	timelines map[int64]*regTimeline
}

// add records a; past maxAnomalies only its type and the count are kept (a broken protocol's
// history can hold tens of thousands, and the report lists maxAnomalies).
func (c *checker) add(a Anomaly) {
	if c.types == nil {
		c.types = map[string]int{}
	}
	c.types[a.Type]++
	if len(c.anomalies) == maxAnomalies {
		c.omitted++
		return
	}
	c.anomalies = append(c.anomalies, a)
}

func (c *checker) run() {
	c.notes = append(c.notes, c.h.notes...)
	c.direct()
	c.g = c.buildGraph()
	c.cycles()
	// After the cycles: an anomaly the model itself forbids, explained by a cycle, is the one
	// to report first.
	c.tsOrder()
}

func (c *checker) report() *Report {
	r := &Report{Model: c.m.name, Counts: Counts{OK: c.h.nOK, Fail: c.h.nFail, Info: c.h.nInfo}}
	if c.g != nil {
		r.Counts.Edges = len(c.g.edges)
	}
	for t := range c.types {
		r.AnomalyTypes = append(r.AnomalyTypes, t)
	}
	sort.Strings(r.AnomalyTypes)
	if r.AnomalyTypes == nil {
		r.AnomalyTypes = []string{}
	}
	r.Anomalies, r.Omitted, r.Counts.Timestamped = c.anomalies, c.omitted, c.timestamped
	if len(c.types) > 0 {
		r.AnomalyCounts = c.types
	}
	if r.Anomalies == nil {
		r.Anomalies = []Anomaly{}
	}
	r.Notes = c.notes
	switch {
	case len(c.anomalies) > 0:
		r.Verdict = Invalid
	case c.h.nOK == 0:
		r.Verdict = Unknown
		r.Notes = append(r.Notes, "no transaction committed, so there is nothing to judge")
	case c.h.nReads == 0:
		r.Verdict = Unknown
		r.Notes = append(r.Notes, "no committed transaction observed a value, so no dependency could be inferred")
	case c.incomplete:
		r.Verdict = Unknown
		r.Notes = append(r.Notes, "a cycle search ran out of its budget before finishing; the history may hide anomalies")
	case c.edgesDropped:
		r.Verdict = Unknown
		r.Notes = append(r.Notes, "some rw edges were left out to bound the graph (see the notes above), so no anomaly found is not enough to call the history valid")
	case c.rtUnchecked:
		r.Verdict = Unknown
		r.Notes = append(r.Notes, fmt.Sprintf("no anomaly was found without real-time order, which is not enough to call the history %s", c.m.name))
	default:
		r.Verdict = Valid
	}
	return r
}

// String renders the report for a person.
func (r *Report) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "model:        %s\n", r.Model)
	fmt.Fprintf(&b, "verdict:      %s\n", r.Verdict)
	fmt.Fprintf(&b, "transactions: %d ok, %d fail, %d info\n", r.Counts.OK, r.Counts.Fail, r.Counts.Info)
	if r.Counts.Timestamped > 0 {
		fmt.Fprintf(&b, "timestamps:   %d committed transactions held to their commit timestamps\n", r.Counts.Timestamped)
	}
	for _, n := range r.Notes {
		fmt.Fprintf(&b, "note:         %s\n", n)
	}
	if len(r.AnomalyTypes) > 0 {
		counts := r.AnomalyCounts
		if counts == nil { // a report built by hand
			counts = map[string]int{}
			for _, a := range r.Anomalies {
				counts[a.Type]++
			}
		}
		parts := make([]string, 0, len(r.AnomalyTypes))
		for _, t := range r.AnomalyTypes {
			parts = append(parts, fmt.Sprintf("%s (%d)", t, counts[t]))
		}
		fmt.Fprintf(&b, "anomalies:    %s\n", strings.Join(parts, ", "))
	}
	for i, a := range r.Anomalies {
		fmt.Fprintf(&b, "\n%d. %s\n", i+1, a.Type)
		for _, line := range strings.Split(a.Explanation, "\n") {
			fmt.Fprintf(&b, "   %s\n", line)
		}
	}
	if r.Omitted > 0 {
		fmt.Fprintf(&b, "\n... and %d more anomalies not listed\n", r.Omitted)
	}
	return b.String()
}
