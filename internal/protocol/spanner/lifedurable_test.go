package spanner

import (
	"testing"

	"github.com/meridiandb/meridian/internal/storage"
	"github.com/meridiandb/meridian/internal/storage/locks"
	"github.com/meridiandb/meridian/internal/ts"
)

// TestGrantsWaitForDurableLife: a participant's answers granting locks carry its life, by which
// a coordinator tells the locks a restart lost from those a late copy of a request took again
// (TestLateCopyAfterRestartDoesNotRestoreLocks). A life whose number is not yet durable may be
// followed, after a crash, by a life of the same number, so its grants wait for the number's
// persist.
func TestGrantsWaitForDurableLife(t *testing.T) {
	c := newTestCluster(t, locks.WoundWait, false)
	a1 := c.key(1, 0, "a1")
	c.crash(1)
	c.reboot(t, 1, 2) // the incarnation's persist is queued, not done
	var answers []*ReadResp
	c.drop = func(d delivered) bool {
		if m, ok := d.m.(*ReadResp); ok && d.from == 1 {
			answers = append(answers, m)
		}
		return false
	}
	c.nodes[1].Handle(0, &ReadReq{Txn: storage.MakeTxnID(0, 9), Age: ts.Timestamp{Wall: 1}, Key: a1})
	if len(answers) != 0 {
		t.Fatalf("granted a lock (%+v) before its life's number was durable", answers[0])
	}
	c.run()
	if len(answers) != 1 || !answers[0].OK || answers[0].Life != 2 {
		t.Fatalf("once the life was durable: answers %+v, want one grant by life 2", answers)
	}
}
