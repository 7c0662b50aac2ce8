package history

import (
	"slices"
	"strings"
	"testing"
)

const invokeLine = `{"index":0,"type":"invoke","process":1,"value":[["r",1,null]]}`

// A line past the limit (a file with no newline, say) is a one-line error naming the line and
// the limit, not bufio's "token too long".
func TestReadLineTooLong(t *testing.T) {
	ok := func(n int) string {
		return `{"index":1,"type":"ok","process":1,"value":[["r",1,[` + strings.Repeat("1,", n) + `1]]]}`
	}
	long := ok(600)
	_, err := read(strings.NewReader(invokeLine+"\n"+long+"\n"), 1024)
	if err == nil || err.Error() != "history line 2: longer than the limit of 1024 bytes per line (is a newline missing?)" {
		t.Errorf("error %v, want one naming line 2 and the 1024-byte limit", err)
	}
	if _, err := read(strings.NewReader(invokeLine+"\n"+ok(400)), 1024); err != nil {
		t.Errorf("a line within the limit: %v", err)
	}
	if got := sizeText(maxLineBytes); got != "64 MiB" {
		t.Errorf("the default limit reads %q", got)
	}
}

// Negative processes, keys and regions are refused with the line they are on.
func TestReadRefusesNegatives(t *testing.T) {
	cases := []struct{ name, line, want string }{
		{"process", `{"index":1,"type":"invoke","process":-2,"value":[["r",1,null]]}`, "history line 2: process -2 is negative"},
		{"key in an invocation", `{"index":1,"type":"invoke","process":2,"value":[["append",-3,1]]}`, "history line 2: key -3 is negative"},
		{"key in a completion", `{"index":1,"type":"ok","process":1,"value":[["r",-1,[]]]}`, "history line 2: key -1 is negative"},
		{"region", `{"index":1,"type":"invoke","process":2,"region":-1,"value":[["r",1,null]]}`, "history line 2: region -1 is negative"},
		{"key_regions key", `{"index":-1,"type":"meta","key_regions":{"1":0,"-4":1,"-5":0}}`, "history line 2: key_regions key -4 is negative"},
		{"key_regions region", `{"index":-1,"type":"meta","key_regions":{"1":0,"2":-1}}`, "history line 2: key_regions gives key 2 region -1"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Read(strings.NewReader(invokeLine + "\n" + tc.line + "\n"))
			if err == nil || !strings.HasPrefix(err.Error(), tc.want) || strings.Contains(err.Error(), "\n") {
				t.Errorf("error %v, want one line starting %q", err, tc.want)
			}
		})
	}
	// The meta line's index is -1 by convention (Recorder.Ops writes it so): not refused.
	if _, err := Read(strings.NewReader(`{"index":-1,"type":"meta","key_regions":{"0":1}}` + "\n" + invokeLine)); err != nil {
		t.Errorf("a meta line with index -1: %v", err)
	}
}

// Read marks the ops whose line has no time, or a null one (Op.Untimed), which Time alone reads
// as 0; lines are numbered with blank ones counted, a last line may lack its newline, "\r\n"
// ends a line, a "time" inside "extra" is not the op's, and keys match as encoding/json matches
// them ("Time" is "time").
func TestReadUntimed(t *testing.T) {
	text := `{"type":"meta","key_regions":{"1":0}}` + "\r\n" +
		`{"index":0,"type":"invoke","process":0,"time":0,"value":[["r",1,null]]}` + "\n\n" +
		`{"index":1,"type":"ok","process":0,"time":null,"value":[["r",1,[]]]}` + "\n" +
		`{"index":2,"type":"invoke","process":1,"extra":{"time":3},"value":[["r",1,null]]}` + "\n" +
		`  {"index":3,"type":"ok","process":1,"Time":4,"value":[["r",1,[]]]}`
	ops, err := Read(strings.NewReader(text))
	if err != nil {
		t.Fatal(err)
	}
	var untimed []int
	for _, op := range ops {
		if op.Untimed {
			untimed = append(untimed, op.Line)
		}
		if op.Line == 6 && op.Time != 4 {
			t.Errorf("line 6 read with time %d, want 4", op.Time)
		}
	}
	if want := []int{1, 4, 5}; !slices.Equal(untimed, want) {
		t.Errorf("untimed lines %v, want %v", untimed, want)
	}
}
