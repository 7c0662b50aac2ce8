package check

import (
	"slices"
	"sort"
)

// kindMask is a set of edge kinds; each edge has exactly one bit set.
type kindMask uint8

const (
	kWW kindMask = 1 << iota // write-write: version order
	kWR                      // write-read: the reader saw the writer's version
	kRW                      // read-write anti-dependency: the writer overwrote what the reader saw
	kPO                      // process (session) order
	kRT                      // real-time order (through barrier nodes)
)

func (k kindMask) String() string {
	switch k {
	case kWW:
		return "ww"
	case kWR:
		return "wr"
	case kRW:
		return "rw"
	case kPO:
		return "process"
	case kRT:
		return "realtime"
	}
	return "?"
}

// edge is a dependency. Nodes below graph.nTxn are transactions (indexes into hist.txns), the
// rest are real-time barriers.
type edge struct {
	from, to int32
	kind     kindMask
	// key is the key behind a data edge, or the region of a per-region real-time edge.
	key int64
	// v1 is the value behind the edge: ww the earlier version, wr the version read, rw the value
	// read (nil1: nothing, i.e. the empty list or the initial register); v2 is the later version
	// (ww, rw).
	v1, v2 int64
	nil1   bool
	// later: v2 is an append no read shows, so it is known only to come after v1, not right after.
	later bool
}

// graph is a dependency graph in compressed sparse row form.
type graph struct {
	n, nTxn int
	edges   []edge
	off     []int32
}

type graphBuilder struct {
	nTxn  int
	n     int
	edges []edge
}

func (b *graphBuilder) add(e edge) { b.edges = append(b.edges, e) }

func (b *graphBuilder) newNode() int32 {
	b.n++
	return int32(b.n - 1)
}

func (b *graphBuilder) finish() *graph {
	// A counting sort by source: linear, and stable so edge order stays deterministic.
	g := &graph{n: b.n, nTxn: b.nTxn, edges: make([]edge, len(b.edges)), off: make([]int32, b.n+1)}
	for _, e := range b.edges {
		g.off[e.from+1]++
	}
	for i := 0; i < b.n; i++ {
		g.off[i+1] += g.off[i]
	}
	fill := slices.Clone(g.off[:b.n])
	for _, e := range b.edges {
		g.edges[fill[e.from]] = e
		fill[e.from]++
	}
	return g
}

// addRealtime adds real-time order among the given transactions with a chain of barriers: T
// precedes the barrier of its completion time, barriers are chained in time order, and the last
// barrier strictly before T's invocation precedes T. So T1 reaches T2 exactly when T1 completed
// before T2 was invoked (equal times count as concurrent), with O(n) edges (notes/rls.md §5.2).
func (b *graphBuilder) addRealtime(txns []*txn, members []int32, region int64) {
	b.addRealtimeFrom(txns, members, members, region)
}

// addRealtimeFrom is addRealtime from the transactions in from to those in to only: T1 in from
// reaches T2 in to exactly when T1 completed before T2 was invoked.
func (b *graphBuilder) addRealtimeFrom(txns []*txn, from, to []int32, key int64) {
	region := key
	members := from
	var ends []int64
	for _, i := range members {
		if t := txns[i]; t.completeTime != neverCompleted {
			ends = append(ends, t.completeTime)
		}
	}
	if len(ends) == 0 {
		return
	}
	slices.Sort(ends)
	ends = slices.Compact(ends)
	first := int32(b.n)
	for range ends {
		b.newNode()
	}
	for j := 1; j < len(ends); j++ {
		b.add(edge{from: first + int32(j-1), to: first + int32(j), kind: kRT, key: region})
	}
	for _, i := range from {
		if t := txns[i]; t.completeTime != neverCompleted {
			j := sort.Search(len(ends), func(x int) bool { return ends[x] >= t.completeTime })
			b.add(edge{from: i, to: first + int32(j), kind: kRT, key: region})
		}
	}
	for _, i := range to {
		// Last barrier with time < invokeTime.
		t := txns[i]
		j := sort.Search(len(ends), func(x int) bool { return ends[x] >= t.invokeTime }) - 1
		if j >= 0 {
			b.add(edge{from: first + int32(j), to: i, kind: kRT, key: region})
		}
	}
}

// sub is a graph view used by the searches: local states, their successors, and for each local
// edge the global edge it stands for.
type sub struct {
	nodes []int32 // local state → global node (for the doubled graph: state/2)
	off   []int32
	to    []int32
	eid   []int32
}

func (s *sub) size() int { return len(s.off) - 1 }

// tarjan returns each state's strongly connected component and the component sizes.
func (s *sub) tarjan() (comp []int32, sizes []int32) {
	n := s.size()
	index := make([]int32, n)
	low := make([]int32, n)
	comp = make([]int32, n)
	onStack := make([]bool, n)
	for i := range index {
		index[i] = -1
		comp[i] = -1
	}
	var stack []int32
	type frame struct{ v, next int32 }
	var call []frame
	next := int32(0)
	for root := 0; root < n; root++ {
		if index[root] >= 0 {
			continue
		}
		call = append(call, frame{int32(root), s.off[root]})
		index[root], low[root] = next, next
		next++
		stack = append(stack, int32(root))
		onStack[root] = true
		for len(call) > 0 {
			f := &call[len(call)-1]
			v := f.v
			if f.next < s.off[v+1] {
				w := s.to[f.next]
				f.next++
				if index[w] < 0 {
					index[w], low[w] = next, next
					next++
					stack = append(stack, w)
					onStack[w] = true
					call = append(call, frame{w, s.off[w]})
				} else if onStack[w] && index[w] < low[v] {
					low[v] = index[w]
				}
				continue
			}
			if low[v] == index[v] {
				c := int32(len(sizes))
				var size int32
				for {
					w := stack[len(stack)-1]
					stack = stack[:len(stack)-1]
					onStack[w] = false
					comp[w] = c
					size++
					if w == v {
						break
					}
				}
				sizes = append(sizes, size)
			}
			call = call[:len(call)-1]
			if len(call) > 0 {
				u := call[len(call)-1].v
				if low[v] < low[u] {
					low[u] = low[v]
				}
			}
		}
	}
	return comp, sizes
}

// bfs finds a shortest path of local edges from src to dst (dst == src: a shortest cycle through
// src), staying inside component c when comp is given. It returns the local edge positions, or nil.
// visited counts edges examined, for the search budget.
func (s *sub) bfs(src, dst int32, comp []int32, c int32, visited *int) []int32 {
	n := s.size()
	parent := make([]int32, n) // local edge position that reached the state, -1 unseen
	for i := range parent {
		parent[i] = -1
	}
	queue := []int32{src}
	for len(queue) > 0 {
		v := queue[0]
		queue = queue[1:]
		for p := s.off[v]; p < s.off[v+1]; p++ {
			*visited++
			w := s.to[p]
			if comp != nil && comp[w] != c {
				continue
			}
			if w == dst {
				path := []int32{p}
				for x := v; x != src; {
					q := parent[x]
					path = append(path, q)
					x = s.from(q)
				}
				slices.Reverse(path)
				return path
			}
			if parent[w] < 0 && w != src {
				parent[w] = p
				queue = append(queue, w)
			}
		}
	}
	return nil
}

// from finds the local source of local edge position p.
func (s *sub) from(p int32) int32 {
	return int32(sort.Search(s.size(), func(i int) bool { return s.off[i+1] > p }))
}
