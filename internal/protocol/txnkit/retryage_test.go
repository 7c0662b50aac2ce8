package txnkit

import (
	"testing"
	"time"

	"github.com/meridiandb/meridian/internal/ts"
)

// TestRetryAges: an aborted transaction's age is handed to its client's retry (attempt > 0)
// once; a client's next transaction (attempt 0) gets a fresh age and clears what was kept; a
// commit keeps nothing; an age not claimed within idle of its abort is forgotten, so a later
// retry is fresh; and the zero value is ready to use.
func TestRetryAges(t *testing.T) {
	const idle = 5 * time.Second
	old := ts.Timestamp{Wall: 100}
	fresh := ts.Timestamp{Wall: 900}
	var r RetryAges
	if got := r.Begin(1, 1, fresh); got != fresh {
		t.Errorf("retry with nothing kept: age %v, want fresh %v", got, fresh)
	}
	r.Expire(0, idle) // the zero value expires nothing and does not panic

	r.Aborted(1, old, 0)
	r.Aborted(2, old, 0)
	if r.Len() != 2 {
		t.Fatalf("%d ages kept after two aborts, want 2", r.Len())
	}
	if got := r.Begin(1, 1, fresh); got != old {
		t.Errorf("retry: age %v, want the aborted attempt's %v", got, old)
	}
	if got := r.Begin(1, 2, fresh); got != fresh {
		t.Errorf("second begin with nothing kept again: age %v, want fresh %v", got, fresh)
	}
	if got := r.Begin(2, 0, fresh); got != fresh {
		t.Errorf("next transaction (attempt 0): age %v, want fresh %v", got, fresh)
	}
	if r.Len() != 0 {
		t.Errorf("%d ages kept after both clients began again, want none", r.Len())
	}

	r.Aborted(3, old, 0)
	r.Aborted(4, old, int64(time.Second))
	r.Expire(int64(idle), idle) // exactly idle after client 3's abort: still kept
	if r.Len() != 2 {
		t.Errorf("%d ages kept at idle after the aborts, want 2", r.Len())
	}
	r.Expire(int64(idle)+1, idle)
	if r.Len() != 1 {
		t.Errorf("%d ages kept just past idle after client 3's abort, want 1 (client 4's)", r.Len())
	}
	if got := r.Begin(3, 1, fresh); got != fresh {
		t.Errorf("retry past idle: age %v, want fresh %v", got, fresh)
	}
	if got := r.Begin(4, 1, fresh); got != old {
		t.Errorf("retry within idle: age %v, want %v", got, old)
	}
}
