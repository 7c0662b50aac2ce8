package history

import (
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
