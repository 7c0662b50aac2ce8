package sim

import "github.com/meridiandb/meridian/internal/wire"

type eventKind uint8

const (
	evDeliver     eventKind = iota + 1 // message arrives at an endpoint
	evCoreFree                         // a node's core finishes its current work item
	evTimer                            // a node timer fires
	evFlushDone                        // a node's disk flush completes
	evClientWake                       // a sleeping or timed-out client resumes
	evClientStart                      // a client coroutine starts
	evFunc                             // a scripted action (faults, measurement marks)
)

type event struct {
	at    int64
	seq   uint64
	kind  eventKind
	to    int32  // endpoint (node or client)
	from  int32  // sender, for deliveries
	inc   uint32 // target node incarnation, for timers and flushes
	token uint64 // timer id, flush id or client wait token
	msg   wire.Msg
	fn    func()
}

// eventQueue is a binary min-heap on (at, seq). Hand-written rather than container/heap to avoid
// interface boxing on the simulator's hottest path.
type eventQueue struct{ h []event }

func (q *eventQueue) less(i, j int) bool {
	a, b := &q.h[i], &q.h[j]
	if a.at != b.at {
		return a.at < b.at
	}
	return a.seq < b.seq
}

func (q *eventQueue) push(e event) {
	q.h = append(q.h, e)
	i := len(q.h) - 1
	for i > 0 {
		p := (i - 1) / 2
		if !q.less(i, p) {
			break
		}
		q.h[i], q.h[p] = q.h[p], q.h[i]
		i = p
	}
}

func (q *eventQueue) pop() event {
	top := q.h[0]
	n := len(q.h) - 1
	q.h[0] = q.h[n]
	q.h[n] = event{}
	q.h = q.h[:n]
	q.down(0)
	return top
}

func (q *eventQueue) len() int { return len(q.h) }

// filter keeps the events keep accepts and restores the heap order in O(n).
func (q *eventQueue) filter(keep func(*event) bool) {
	n := 0
	for i := range q.h {
		if keep(&q.h[i]) {
			q.h[n] = q.h[i]
			n++
		}
	}
	clear(q.h[n:])
	q.h = q.h[:n]
	for i := n/2 - 1; i >= 0; i-- {
		q.down(i)
	}
}

func (q *eventQueue) down(i int) {
	n := len(q.h)
	for {
		l := 2*i + 1
		if l >= n {
			return
		}
		m := l
		if r := l + 1; r < n && q.less(r, l) {
			m = r
		}
		if !q.less(m, i) {
			return
		}
		q.h[i], q.h[m] = q.h[m], q.h[i]
		i = m
	}
}
