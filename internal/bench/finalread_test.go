package bench

import (
	"strings"
	"testing"

	"github.com/meridiandb/meridian/internal/history"
)

func appendOp(typ string, process int, key, value int64) history.Op {
	return history.Op{Type: typ, Process: process, Value: []history.MicroOp{{F: history.FAppend, Key: key, Value: history.IntValue(value)}}}
}

func finalRead(process int, lists map[int64][]int64) history.Op {
	op := history.Op{Type: history.OK, Process: process}
	for k := int64(0); k < int64(len(lists)); k++ {
		op.Value = append(op.Value, history.MicroOp{F: history.FRead, Key: k, Value: history.ListValue(lists[k])})
	}
	return op
}

// The final read judges every acknowledged append (present), every failed one (absent) and no
// unknown one, under any model: an append no read during the run saw is judged all the same.
func TestDurabilityJudgesTheFinalRead(t *testing.T) {
	ops := []history.Op{
		appendOp(history.OK, 1, 0, 10),
		appendOp(history.OK, 2, 1, 20),
		appendOp(history.OK, 2, 1, 21), // lost
		appendOp(history.Fail, 3, 0, 30),
		appendOp(history.Fail, 3, 1, 31), // took effect
		appendOp(history.Info, 1+processStride, 0, 40),
		appendOp(history.Info, 1+processStride, 1, 41),
		appendOp(history.OK, 4, 7, 70), // a key no final read reached: not judged
	}
	d := durability(append(ops, finalRead(processStride, map[int64][]int64{0: {10, 40}, 1: {20, 31}})))
	if d.Keys != 2 || d.Acknowledged != 3 || d.Failed != 2 {
		t.Fatalf("judged %d keys, %d acknowledged and %d failed writes; want 2, 3, 2", d.Keys, d.Acknowledged, d.Failed)
	}
	if len(d.Lost) != 1 || d.Lost[0] != "key 1: 21" || len(d.Undone) != 1 || d.Undone[0] != "key 1: 31" {
		t.Fatalf("lost %v, undone %v; want [key 1: 21] and [key 1: 31]", d.Lost, d.Undone)
	}
	if err := d.Err(); err == nil || !strings.Contains(err.Error(), "1 of 3 acknowledged writes lost: missing from the final read and from another 1s later (key 1: 21)") {
		t.Fatalf("error %v", err)
	}
	if d := durability(append(ops[:2], finalRead(finalReadProcess, map[int64][]int64{0: {10}, 1: {20}}))); d.Err() != nil {
		t.Fatalf("nothing lost, yet: %v", d)
	}
}

// A register acknowledged as written must not read back as never written; a failed write's
// value must not be what the final read finds.
func TestDurabilityOfRegisters(t *testing.T) {
	w := func(typ string, key, v int64) history.Op {
		return history.Op{Type: typ, Process: 1, Value: []history.MicroOp{{F: history.FWrite, Key: key, Value: history.IntValue(v)}}}
	}
	final := history.Op{Type: history.OK, Process: finalReadProcess, Value: []history.MicroOp{
		{F: history.FRead, Key: 0, Value: history.IntValue(5)},
		{F: history.FRead, Key: 1}, // null: never written
	}}
	d := durability([]history.Op{w(history.OK, 0, 4), w(history.Fail, 0, 5), w(history.OK, 1, 6), final})
	if len(d.Lost) != 1 || d.Lost[0] != "key 1: 6" || len(d.Undone) != 1 || d.Undone[0] != "key 0: 5" {
		t.Fatalf("lost %v, undone %v; want [key 1: 6] and [key 0: 5]", d.Lost, d.Undone)
	}
}

// A register's acknowledged write is lost when the final value was written by a transaction that
// completed before the write's began: one key's writes are ordered in real time under every
// protocol here. Checked only for "the key was written", such a loss passed (review). Writers
// that overlap in time are not ordered by it, and an unknown outcome orders nothing.
func TestDurabilityOfRegistersInRealTime(t *testing.T) {
	txn := func(process int, typ string, invoked, done, key, v int64) []history.Op {
		m := []history.MicroOp{{F: history.FWrite, Key: key, Value: history.IntValue(v)}}
		return []history.Op{
			{Type: history.Invoke, Process: process, Time: invoked, Value: m},
			{Type: typ, Process: process, Time: done, Value: m},
		}
	}
	final := history.Op{Type: history.OK, Process: finalReadProcess, Value: []history.MicroOp{
		{F: history.FRead, Key: 0, Value: history.IntValue(1)},
		{F: history.FRead, Key: 1, Value: history.IntValue(1)},
		{F: history.FRead, Key: 2, Value: history.IntValue(1)},
	}}
	var ops []history.Op
	ops = append(ops, txn(1, history.OK, 0, 10, 0, 1)...)   // key 0: 1, then 2 begun after it: 2 lost
	ops = append(ops, txn(2, history.OK, 20, 30, 0, 2)...)  //
	ops = append(ops, txn(3, history.OK, 0, 10, 1, 1)...)   // key 1: 1 and 2 overlap: either may be last
	ops = append(ops, txn(4, history.OK, 5, 30, 1, 2)...)   //
	ops = append(ops, txn(5, history.Info, 0, 10, 2, 1)...) // key 2: 1's outcome unknown: it may have landed last
	ops = append(ops, txn(6, history.OK, 20, 30, 2, 2)...)  //
	d := durability(append(ops, final))
	if len(d.Lost) != 1 || d.Lost[0] != "key 0: 2" {
		t.Fatalf("lost %v, want [key 0: 2]", d.Lost)
	}
}
