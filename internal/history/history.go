// Package history records what clients asked for and what they saw, in the JSON-lines format of
// Jepsen's Elle, so Meridian's checker (and tools written elsewhere) can judge a run.
//
// One line per event. An invocation and its completion share a process; a completion's type is
// "ok" (committed), "fail" (certainly did not commit) or "info" (outcome unknown):
//
//	{"index":0,"type":"invoke","f":"txn","process":3,"time":1200,"region":1,"value":[["append",5,7],["r",6,null]]}
//	{"index":1,"type":"ok","f":"txn","process":3,"time":9800,"region":1,"value":[["append",5,7],["r",6,[1,7]]]}
//
// Micro-ops are list-append (["append",k,v], ["r",k,[…]|null]) or read-write register
// (["w",k,v], ["r",k,v|null]). A completion that carries micro-ops restates its invocation's,
// in order, with the values read filled in. A "fail" completion may carry only the micro-ops
// the transaction reached before it aborted, with their reads (opacity needs them). A first line of type "meta" may name each key's region
// ({"type":"meta","key_regions":{"5":0,"6":2}}) for region-aware models.
package history

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"strconv"
	"sync"
)

// Event types.
const (
	Invoke = "invoke"
	OK     = "ok"
	Fail   = "fail"
	Info   = "info"
	Meta   = "meta"
)

// CommitTS is the commit timestamp a protocol reported for a transaction (ts.Timestamp's parts),
// which the checker holds the history to where the meta line declares TimestampOrder.
type CommitTS struct {
	Wall    int64  `json:"wall"`
	Logical uint32 `json:"logical"`
	Origin  uint32 `json:"origin"`
}

// Micro-op functions.
const (
	FAppend = "append"
	FRead   = "r"
	FWrite  = "w"
)

// ValueKind says which of Value's fields is meaningful.
type ValueKind uint8

// Value kinds: absent (JSON null), one integer, or a list of integers.
const (
	None ValueKind = iota
	Int
	List
)

// Value is a micro-op's argument or result.
type Value struct {
	Kind ValueKind
	Int  int64
	List []int64
}

// IntValue makes an integer value.
func IntValue(v int64) Value { return Value{Kind: Int, Int: v} }

// ListValue makes a list value (an empty, non-nil list is an existing empty list).
func ListValue(l []int64) Value { return Value{Kind: List, List: l} }

// MicroOp is one operation inside a transaction, encoded as [f, key, value].
type MicroOp struct {
	F     string
	Key   int64
	Value Value
}

// MarshalJSON encodes [f, key, value].
func (m MicroOp) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteString(`["`)
	b.WriteString(m.F)
	b.WriteString(`",`)
	b.WriteString(strconv.FormatInt(m.Key, 10))
	b.WriteByte(',')
	switch m.Value.Kind {
	case None:
		b.WriteString("null")
	case Int:
		b.WriteString(strconv.FormatInt(m.Value.Int, 10))
	case List:
		b.WriteByte('[')
		for i, v := range m.Value.List {
			if i > 0 {
				b.WriteByte(',')
			}
			b.WriteString(strconv.FormatInt(v, 10))
		}
		b.WriteByte(']')
	}
	b.WriteByte(']')
	return b.Bytes(), nil
}

// UnmarshalJSON decodes [f, key, value].
func (m *MicroOp) UnmarshalJSON(data []byte) error {
	var raw []json.RawMessage
	if err := json.Unmarshal(data, &raw); err != nil {
		return fmt.Errorf("micro-op: %w", err)
	}
	if len(raw) != 3 {
		return fmt.Errorf("micro-op: want [f, key, value], got %d elements", len(raw))
	}
	if err := json.Unmarshal(raw[0], &m.F); err != nil {
		return fmt.Errorf("micro-op function: %w", err)
	}
	switch m.F {
	case FAppend, FRead, FWrite:
	default:
		return fmt.Errorf("micro-op: unknown function %q (want append, r or w)", m.F)
	}
	if err := json.Unmarshal(raw[1], &m.Key); err != nil {
		return fmt.Errorf("micro-op key: want an integer: %w", err)
	}
	v := bytes.TrimSpace(raw[2])
	switch {
	case bytes.Equal(v, []byte("null")):
		m.Value = Value{}
	case len(v) > 0 && v[0] == '[':
		var l []int64
		if err := json.Unmarshal(v, &l); err != nil {
			return fmt.Errorf("micro-op value: %w", err)
		}
		if l == nil {
			l = []int64{}
		}
		m.Value = ListValue(l)
	default:
		var n int64
		if err := json.Unmarshal(v, &n); err != nil {
			return fmt.Errorf("micro-op value: want null, an integer or a list: %w", err)
		}
		m.Value = IntValue(n)
	}
	return nil
}

// Op is one line of a history.
type Op struct {
	Index      int64            `json:"index"`
	Type       string           `json:"type"`
	F          string           `json:"f,omitempty"`
	Process    int              `json:"process"`
	Time       int64            `json:"time"`
	Region     int              `json:"region"`
	Value      []MicroOp        `json:"value,omitempty"`
	Error      string           `json:"error,omitempty"`
	KeyRegions map[string]int   `json:"key_regions,omitempty"` // meta lines only
	Extra      map[string]int64 `json:"extra,omitempty"`       // free-form, for debugging
	// CommitTS (ok completions) is the transaction's commit timestamp, when the protocol
	// reported one.
	CommitTS *CommitTS `json:"commit_ts,omitempty"`
	// TimestampOrder (meta lines only) declares that the history's commit timestamps order its
	// transactions (protocol.TimestampOrdered), which the checker then verifies.
	TimestampOrder bool `json:"timestamp_order,omitempty"`
	// TrueTime (meta lines only) declares that the operations' times are true time on the
	// clock the commit timestamps' wall parts count (the simulator's virtual time), so that a
	// timestamp can be placed within its transaction's lifetime.
	TrueTime bool `json:"true_time,omitempty"`
	// Line is the line Read found the op on (0: not read from a file), so that later checks
	// can name it.
	Line int `json:"-"`
	// Untimed: Read found no "time" on the op's line (or a null one), which Time alone, 0 then,
	// cannot tell from a time of 0. Histories written by Write always carry times.
	Untimed bool `json:"-"`
}

// Recorder collects a history. It is safe for concurrent use (real clients run in parallel);
// in the simulator calls come one at a time, so the order is deterministic.
type Recorder struct {
	mu         sync.Mutex
	ops        []Op
	keyRegions map[int64]int
	tsOrder    bool
	trueTime   bool
}

// DeclareTrueTime marks the history's times as true time in the commit timestamps' frame
// (Op.TrueTime on the meta line): only the simulator knows it.
func (r *Recorder) DeclareTrueTime() {
	r.mu.Lock()
	r.trueTime = true
	r.mu.Unlock()
}

// DeclareTimestampOrder marks the history as one whose commit timestamps order its transactions
// (Op.TimestampOrder on the meta line).
func (r *Recorder) DeclareTimestampOrder() {
	r.mu.Lock()
	r.tsOrder = true
	r.mu.Unlock()
}

// NewRecorder returns an empty recorder.
func NewRecorder() *Recorder { return &Recorder{keyRegions: map[int64]int{}} }

// SetKeyRegion notes the region of a key, for region-aware checking.
func (r *Recorder) SetKeyRegion(key int64, region int) {
	r.mu.Lock()
	r.keyRegions[key] = region
	r.mu.Unlock()
}

// Invoke records the start of a transaction and returns its index.
func (r *Recorder) Invoke(process, region int, now int64, value []MicroOp) int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	idx := int64(len(r.ops))
	r.ops = append(r.ops, Op{Index: idx, Type: Invoke, F: "txn", Process: process, Time: now, Region: region, Value: cloneOps(value)})
	return idx
}

// Complete records the end of a process's current transaction.
func (r *Recorder) Complete(typ string, process, region int, now int64, value []MicroOp, errText string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.ops = append(r.ops, Op{Index: int64(len(r.ops)), Type: typ, F: "txn", Process: process, Time: now, Region: region, Value: cloneOps(value), Error: errText})
}

// CompleteCommitted records an ok completion with the commit timestamp the protocol reported
// (wall, logical, origin: ts.Timestamp's parts).
func (r *Recorder) CompleteCommitted(process, region int, now int64, value []MicroOp, wall int64, logical, origin uint32) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.ops = append(r.ops, Op{Index: int64(len(r.ops)), Type: OK, F: "txn", Process: process, Time: now, Region: region, Value: cloneOps(value),
		CommitTS: &CommitTS{Wall: wall, Logical: logical, Origin: origin}})
}

// Ops returns a copy of the recorded events (with a leading meta line if key regions are known).
func (r *Recorder) Ops() []Op {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]Op, 0, len(r.ops)+1)
	if len(r.keyRegions) > 0 || r.tsOrder || r.trueTime {
		out = append(out, Op{Index: -1, Type: Meta, TimestampOrder: r.tsOrder, TrueTime: r.trueTime})
	}
	if len(r.keyRegions) > 0 {
		keys := make([]int64, 0, len(r.keyRegions))
		for k := range r.keyRegions {
			keys = append(keys, k)
		}
		sort.Slice(keys, func(i, j int) bool { return keys[i] < keys[j] })
		m := make(map[string]int, len(keys))
		for _, k := range keys {
			m[strconv.FormatInt(k, 10)] = r.keyRegions[k]
		}
		out[0].KeyRegions = m
	}
	return append(out, r.ops...)
}

// Len is the number of recorded events.
func (r *Recorder) Len() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.ops)
}

func cloneOps(v []MicroOp) []MicroOp {
	out := make([]MicroOp, len(v))
	for i, m := range v {
		out[i] = m
		if m.Value.Kind == List {
			out[i].Value.List = append([]int64{}, m.Value.List...)
		}
	}
	return out
}

// Write writes ops as JSON lines.
func Write(w io.Writer, ops []Op) error {
	bw := bufio.NewWriter(w)
	enc := json.NewEncoder(bw)
	for i := range ops {
		if err := enc.Encode(&ops[i]); err != nil {
			return fmt.Errorf("history: write op %d: %w", ops[i].Index, err)
		}
	}
	return bw.Flush()
}

// maxLineBytes bounds one line of a history: generous for one transaction (a read of a list of a
// million appends is under 20 MiB of text), yet a file with no newline cannot take all memory.
const maxLineBytes = 64 << 20

// Read parses a JSON-lines history. A malformed line is an error naming its line number.
func Read(r io.Reader) ([]Op, error) { return read(r, maxLineBytes) }

func read(r io.Reader, maxLine int) ([]Op, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, min(64<<10, maxLine)), maxLine)
	var ops []Op
	line := 0
	for sc.Scan() {
		line++
		b := bytes.TrimSpace(sc.Bytes())
		if len(b) == 0 {
			continue
		}
		// The outer Time shadows Op's, so a line without one can be told from "time":0.
		var in struct {
			Op
			Time *int64 `json:"time"`
		}
		dec := json.NewDecoder(bytes.NewReader(b))
		if err := dec.Decode(&in); err != nil {
			return nil, fmt.Errorf("history line %d: %w", line, err)
		}
		op := in.Op
		op.Line = line
		if in.Time != nil {
			op.Time = *in.Time
		} else {
			op.Untimed = true
		}
		if dec.InputOffset() != int64(len(b)) {
			// Without this, a line holding two objects would silently lose the second.
			return nil, fmt.Errorf("history line %d: unexpected text after the JSON object", line)
		}
		switch op.Type {
		case Invoke, OK, Fail, Info, Meta:
		default:
			return nil, fmt.Errorf("history line %d: unknown type %q (want invoke, ok, fail, info or meta)", line, op.Type)
		}
		if err := checkNotNegative(&op); err != nil {
			return nil, fmt.Errorf("history line %d: %w", line, err)
		}
		ops = append(ops, op)
	}
	if err := sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			return nil, fmt.Errorf("history line %d: longer than the limit of %s per line (is a newline missing?)", line+1, sizeText(maxLine))
		}
		return nil, fmt.Errorf("history line %d: %w", line+1, err)
	}
	return ops, nil
}

func sizeText(n int) string {
	if n%(1<<20) == 0 {
		return fmt.Sprintf("%d MiB", n>>20)
	}
	return fmt.Sprintf("%d bytes", n)
}

// checkNotNegative refuses negative processes, keys and regions. Elle would take them (its keys
// and processes are opaque), but no Meridian history has one: processes count clients from 0,
// keys are list-append key numbers from 0 (kv exec refuses negative ones, and the storage name of
// one would sit on a negative shard), and regions index the topology. So a negative number means
// a file damaged or written wrong, which is better said than judged; a region of -1 would also
// pass for the checker's "every region" in its explanations.
func checkNotNegative(op *Op) error {
	if op.Type == Meta {
		keys := make([]string, 0, len(op.KeyRegions))
		for k := range op.KeyRegions {
			keys = append(keys, k)
		}
		sort.Strings(keys) // the first bad key named must not depend on map order
		for _, k := range keys {
			if n, err := strconv.ParseInt(k, 10, 64); err == nil && n < 0 {
				return fmt.Errorf("key_regions key %d is negative (keys are numbered from 0)", n)
			}
			if r := op.KeyRegions[k]; r < 0 {
				return fmt.Errorf("key_regions gives key %s region %d, which is negative (regions are numbered from 0)", k, r)
			}
		}
		return nil
	}
	if op.Process < 0 {
		return fmt.Errorf("process %d is negative (processes are numbered from 0)", op.Process)
	}
	if op.Region < 0 {
		return fmt.Errorf("region %d is negative (regions are numbered from 0)", op.Region)
	}
	for _, m := range op.Value {
		if m.Key < 0 {
			return fmt.Errorf("key %d is negative (keys are numbered from 0)", m.Key)
		}
	}
	return nil
}
