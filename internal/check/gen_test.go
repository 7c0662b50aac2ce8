package check

import (
	"math/rand/v2"
	"slices"
	"strconv"

	"github.com/meridiandb/meridian/internal/history"
)

// genConfig shapes a generated history.
type genConfig struct {
	txns, procs, keys, opsPerTxn, regions int
	register                              bool
	failPct, infoPct                      int
	// mutant breaks the execution on purpose (see the mutant constants); "" runs it serially.
	mutant string
	// mutateAll applies the mutant wherever it can, not just once.
	mutateAll bool
}

// Mutants: deliberately broken executions the checker must flag.
const (
	// mutantStale: a read-only transaction misses the latest append to a key it reads, although
	// the appender completed before it was invoked (a stale read: strict serializability broken).
	mutantStale = "stale"
	// mutantLostUpdate: a transaction that reads then appends to a key misses the key's last
	// append (another transaction's) in its read (a lost update: serializability broken).
	mutantLostUpdate = "lost-update"
	// mutantAbortedRead: a failed transaction's writes are applied anyway (G1a).
	mutantAbortedRead = "aborted-read"
)

// generate runs a random workload serially — each transaction takes effect at a commit point
// inside its [invoke, complete] interval, in commit-point order — and records it. So the history
// is strictly serializable (and satisfies every weaker model) unless a mutant interferes.
func generate(rng *rand.Rand, cfg genConfig) (ops []history.Op, mutated bool) {
	type event struct {
		time int64
		op   history.Op
	}
	var events []event
	lists := map[int64][]int64{}
	regs := map[int64]int64{}
	// lastWriter remembers, per key, when the last committed writer completed and the key's
	// length before its appends (for the stale mutant).
	type lastW struct {
		complete int64
		before   int
	}
	lastWriter := map[int64]lastW{}
	next := map[int64]int64{}
	free := make([]int64, cfg.procs) // each process's last completion time
	procID := make([]int, cfg.procs)
	for i := range procID {
		procID[i] = i
	}
	nextProc := cfg.procs
	base := int64(0)
	t := int64(100)
	for i := 0; i < cfg.txns; i++ {
		t += 1 + rng.Int64N(4)
		if rng.IntN(8) == 0 {
			base++ // retire a key so lists stay short, as Elle's generators do
		}
		// A free process: one whose last transaction completed before the commit point.
		p := -1
		for _, q := range rng.Perm(cfg.procs) {
			if free[q] < t {
				p = q
				break
			}
		}
		if p < 0 {
			p = 0
			for q := range free {
				if free[q] < free[p] {
					p = q
				}
			}
			t = free[p] + 1
		}
		invoke := t - rng.Int64N(min(20, t-free[p]))
		complete := t + rng.Int64N(20)
		free[p] = complete
		// The transaction's micro-ops.
		n := 1 + rng.IntN(cfg.opsPerTxn)
		ops := make([]history.MicroOp, n)
		readOnly := true
		for j := range ops {
			k := base + rng.Int64N(int64(cfg.keys))
			if rng.IntN(2) == 0 {
				ops[j] = history.MicroOp{F: history.FRead, Key: k}
				continue
			}
			readOnly = false
			next[k]++
			if cfg.register {
				ops[j] = history.MicroOp{F: history.FWrite, Key: k, Value: history.IntValue(next[k])}
			} else {
				ops[j] = history.MicroOp{F: history.FAppend, Key: k, Value: history.IntValue(next[k])}
			}
		}
		outcome := history.OK
		switch r := rng.IntN(100); {
		case r < cfg.failPct:
			outcome = history.Fail
		case r < cfg.failPct+cfg.infoPct:
			outcome = history.Info
		}
		apply := outcome == history.OK || (outcome == history.Info && rng.IntN(2) == 0) ||
			(outcome == history.Fail && cfg.mutant == mutantAbortedRead && !readOnly)
		// Execute against a private copy; publish it if the transaction takes effect.
		myLists := map[int64][]int64{}
		myRegs := map[int64]*int64{}
		getList := func(k int64) []int64 {
			if l, ok := myLists[k]; ok {
				return l
			}
			return lists[k]
		}
		done := make([]history.MicroOp, 0, n)
		stop := n
		if outcome == history.Fail {
			stop = 1 + rng.IntN(n)
		}
		for j := 0; j < stop; j++ {
			m := ops[j]
			switch m.F {
			case history.FRead:
				if cfg.register {
					if v, ok := myRegs[m.Key]; ok {
						m.Value = history.IntValue(*v)
					} else if v, ok := regs[m.Key]; ok {
						m.Value = history.IntValue(v)
					}
					break
				}
				l := slices.Clone(getList(m.Key))
				_, own := myLists[m.Key]
				if !own && (!mutated || cfg.mutateAll) && outcome == history.OK {
					if lw, ok := lastWriter[m.Key]; ok && cfg.mutant == mutantStale && readOnly && lw.complete < invoke && lw.before < len(l) {
						l = l[:lw.before]
						mutated = true
					}
					if cfg.mutant == mutantLostUpdate && len(l) > 0 && writesKey(ops[j+1:], m.Key) {
						l = l[:len(l)-1]
						mutated = true
					}
				}
				m.Value = history.ListValue(l)
			case history.FAppend:
				myLists[m.Key] = append(slices.Clone(getList(m.Key)), m.Value.Int)
			case history.FWrite:
				v := m.Value.Int
				myRegs[m.Key] = &v
			}
			done = append(done, m)
		}
		if apply {
			for _, m := range ops { // an applied transaction's writes all take effect
				switch m.F {
				case history.FAppend:
					if outcome == history.OK {
						lastWriter[m.Key] = lastW{complete: complete, before: len(lists[m.Key])}
					} else {
						delete(lastWriter, m.Key) // an unknown outcome may take effect arbitrarily late
					}
					lists[m.Key] = append(lists[m.Key], m.Value.Int)
				case history.FWrite:
					regs[m.Key] = m.Value.Int
				}
			}
		}
		inv := history.Op{Type: history.Invoke, F: "txn", Process: procID[p], Time: invoke, Region: p % cfg.regions, Value: ops}
		comp := history.Op{Type: outcome, F: "txn", Process: procID[p], Time: complete, Region: p % cfg.regions}
		switch outcome {
		case history.OK:
			comp.Value = done
		case history.Fail:
			comp.Value = done
		}
		events = append(events, event{invoke, inv}, event{complete, comp})
		if outcome == history.Info {
			// Jepsen retires a process whose transaction's outcome is unknown.
			procID[p] = nextProc
			nextProc++
		}
	}
	slices.SortStableFunc(events, func(a, b event) int {
		if a.time != b.time {
			if a.time < b.time {
				return -1
			}
			return 1
		}
		return 0
	})
	keyRegions := map[string]int{}
	for k := int64(0); k < base+int64(cfg.keys); k++ {
		keyRegions[strconv.FormatInt(k, 10)] = int(k % int64(cfg.regions))
	}
	out := []history.Op{{Index: -1, Type: history.Meta, KeyRegions: keyRegions}}
	for i, e := range events {
		e.op.Index = int64(i)
		out = append(out, e.op)
	}
	if cfg.mutant == mutantAbortedRead {
		mutated = observesAborted(out)
	}
	return out, mutated
}

// observesAborted reports whether a committed read shows a failed transaction's append.
func observesAborted(ops []history.Op) bool {
	failed := map[kv]bool{}
	for _, op := range ops {
		if op.Type == history.Fail {
			for _, m := range op.Value {
				if m.F == history.FAppend {
					failed[kv{m.Key, m.Value.Int}] = true
				}
			}
		}
	}
	for _, op := range ops {
		if op.Type == history.OK {
			for _, m := range op.Value {
				for _, v := range m.Value.List {
					if m.F == history.FRead && failed[kv{m.Key, v}] {
						return true
					}
				}
			}
		}
	}
	return false
}

func writesKey(ops []history.MicroOp, k int64) bool {
	for _, m := range ops {
		if m.Key == k && m.F != history.FRead {
			return true
		}
	}
	return false
}
