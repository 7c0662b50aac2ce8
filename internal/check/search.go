package check

import (
	"slices"
)

// cycles finds the strongly connected components of the model's graph and, in each, the first
// forbidden cycle the model's searches turn up.
func (c *checker) cycles() {
	g := c.g
	full := &sub{off: g.off, to: make([]int32, len(g.edges)), eid: nil}
	for i, e := range g.edges {
		full.to[i] = e.to
	}
	comp, sizes := full.tarjan()
	members := make([][]int32, len(sizes))
	for v := 0; v < g.n; v++ {
		if sizes[comp[v]] > 1 {
			members[comp[v]] = append(members[comp[v]], int32(v))
		}
	}
	// Components in order of their first transaction, so reports are deterministic and read in
	// history order.
	var cs []int32
	for ci, m := range members {
		if len(m) > 1 && int(m[0]) < g.nTxn {
			cs = append(cs, int32(ci))
		}
	}
	slices.SortFunc(cs, func(a, b int32) int { return int(members[a][0]) - int(members[b][0]) })
	c.comp = comp
	c.loc = make([]int32, g.n)
	for i := range c.loc {
		c.loc[i] = -1
	}
	for _, ci := range cs {
		c.searchComponent(members[ci], ci)
	}
}

// searchComponent runs the model's searches on one component; the first hit is reported.
func (c *checker) searchComponent(nodes []int32, ci int32) {
	for i, v := range nodes {
		c.loc[v] = int32(i)
	}
	defer func() {
		for _, v := range nodes {
			c.loc[v] = -1
		}
	}()
	for _, s := range c.m.searches {
		var path []int32
		switch s.kind {
		case anyCycle:
			path = c.anyCycle(nodes, ci, s.mask)
		case oneRW:
			path = c.oneRW(nodes, ci, s.mask)
		case nonAdjacentRW:
			path = c.nonAdjacent(nodes, ci, s.mask)
		case causalPattern:
			path = c.causal(nodes, ci)
		}
		if path != nil {
			c.add(c.explainCycle(path, s.kind == causalPattern))
			return
		}
	}
}

// local builds the view of a component restricted to edges in mask.
func (c *checker) local(nodes []int32, ci int32, mask kindMask) *sub {
	g := c.g
	s := &sub{nodes: nodes, off: make([]int32, len(nodes)+1)}
	for i, v := range nodes {
		for p := g.off[v]; p < g.off[v+1]; p++ {
			e := &g.edges[p]
			if e.kind&mask != 0 && c.comp[e.to] == ci {
				s.to = append(s.to, c.loc[e.to])
				s.eid = append(s.eid, p)
			}
		}
		s.off[i+1] = int32(len(s.to))
	}
	return s
}

func (s *sub) globalPath(path []int32) []int32 {
	out := make([]int32, len(path))
	for i, p := range path {
		out[i] = s.eid[p]
	}
	return out
}

// shortestCycleIn finds, in the first non-trivial component of s that holds a transaction, a short
// cycle: the shortest through each of a few of its transactions.
func (c *checker) shortestCycleIn(s *sub, isTxn func(state int32) bool) []int32 {
	comp, sizes := s.tarjan()
	target := int32(-1)
	for st := 0; st < s.size(); st++ {
		if sizes[comp[st]] > 1 && isTxn(int32(st)) {
			target = comp[st]
			break
		}
	}
	if target < 0 {
		return nil
	}
	var best []int32
	tries := 0
	for st := int32(0); st < int32(s.size()) && tries < 4; st++ {
		if comp[st] != target || !isTxn(st) {
			continue
		}
		tries++
		visited := 0
		if p := s.bfs(st, st, comp, target, &visited); p != nil && (best == nil || len(p) < len(best)) {
			best = p
		}
		c.budget -= visited
	}
	return s.globalPath(best)
}

func (c *checker) anyCycle(nodes []int32, ci int32, mask kindMask) []int32 {
	s := c.local(nodes, ci, mask)
	return c.shortestCycleIn(s, func(st int32) bool { return int(nodes[st]) < c.g.nTxn })
}

// nonAdjacent finds a cycle in which no two rw edges are adjacent — a cycle of (D ; RW?) with D the
// other kinds, which snapshot isolation forbids — by searching a doubled graph whose state records
// whether the last edge was rw.
func (c *checker) nonAdjacent(nodes []int32, ci int32, mask kindMask) []int32 {
	g := c.g
	n := len(nodes)
	s := &sub{off: make([]int32, 2*n+1)}
	for st := 0; st < 2*n; st++ {
		v := nodes[st/2]
		afterRW := st%2 == 1
		for p := g.off[v]; p < g.off[v+1]; p++ {
			e := &g.edges[p]
			if e.kind&mask == 0 || c.comp[e.to] != ci {
				continue
			}
			j := c.loc[e.to]
			if e.kind == kRW {
				if afterRW {
					continue
				}
				s.to = append(s.to, 2*j+1)
			} else {
				s.to = append(s.to, 2*j)
			}
			s.eid = append(s.eid, p)
		}
		s.off[st+1] = int32(len(s.to))
	}
	return c.shortestCycleIn(s, func(st int32) bool { return int(nodes[st/2]) < g.nTxn })
}

// oneRW finds a cycle with exactly one rw edge a→b: a path from b back to a using only mask edges.
func (c *checker) oneRW(nodes []int32, ci int32, mask kindMask) []int32 {
	s := c.local(nodes, ci, mask)
	rws := c.rwEdges(nodes, ci)
	for i := 0; i < len(rws); {
		b := c.g.edges[rws[i]].to
		j := i
		for j < len(rws) && c.g.edges[rws[j]].to == b {
			j++
		}
		// One BFS from b serves every rw edge into b.
		parent, visited := s.reach(c.loc[b])
		c.budget -= visited
		for _, r := range rws[i:j] {
			a := c.loc[c.g.edges[r].from]
			if parent[a] >= 0 {
				path := s.pathTo(parent, c.loc[b], a)
				return append(s.globalPath(path), r)
			}
		}
		if c.budget < 0 {
			c.incomplete = true
			return nil
		}
		i = j
	}
	return nil
}

// rwEdges lists the component's rw edges, grouped by target.
func (c *checker) rwEdges(nodes []int32, ci int32) []int32 {
	var out []int32
	for _, v := range nodes {
		for p := c.g.off[v]; p < c.g.off[v+1]; p++ {
			if e := &c.g.edges[p]; e.kind == kRW && c.comp[e.to] == ci {
				out = append(out, p)
			}
		}
	}
	slices.SortStableFunc(out, func(x, y int32) int { return int(c.g.edges[x].to) - int(c.g.edges[y].to) })
	return out
}

// reach runs a BFS from src and returns, per state, the local edge that first reached it (-1:
// unreached).
func (s *sub) reach(src int32) (parent []int32, visited int) {
	parent = make([]int32, s.size())
	for i := range parent {
		parent[i] = -1
	}
	queue := []int32{src}
	for len(queue) > 0 {
		v := queue[0]
		queue = queue[1:]
		for p := s.off[v]; p < s.off[v+1]; p++ {
			visited++
			if w := s.to[p]; w != src && parent[w] < 0 {
				parent[w] = p
				queue = append(queue, w)
			}
		}
	}
	return parent, visited
}

func (s *sub) pathTo(parent []int32, src, dst int32) []int32 {
	var path []int32
	for x := dst; x != src; {
		p := parent[x]
		path = append(path, p)
		x = s.from(p)
	}
	slices.Reverse(path)
	return path
}

// causal finds a transaction that read a version of x older than one written by a transaction in
// its causal past: an rw edge T→U on key x, then ww edges on x (later versions of x), then a
// non-empty path of process-order and wr edges (causality) back to T.
func (c *checker) causal(nodes []int32, ci int32) []int32 {
	g := c.g
	n := len(nodes)
	// States 2i (still following ww on the key) and 2i+1 (following causality). The key varies
	// with the rw edge, so the view is built per key.
	rws := c.rwEdges(nodes, ci)
	slices.SortStableFunc(rws, func(x, y int32) int {
		ex, ey := &g.edges[x], &g.edges[y]
		if ex.key != ey.key {
			if ex.key < ey.key {
				return -1
			}
			return 1
		}
		return int(ex.to) - int(ey.to)
	})
	var s *sub
	sKey := int64(0)
	for i := 0; i < len(rws); {
		e0 := &g.edges[rws[i]]
		j := i
		for j < len(rws) && g.edges[rws[j]].to == e0.to && g.edges[rws[j]].key == e0.key {
			j++
		}
		if s == nil || sKey != e0.key {
			sKey = e0.key
			s = &sub{off: make([]int32, 2*n+1)}
			for st := 0; st < 2*n; st++ {
				v := nodes[st/2]
				onKey := st%2 == 0
				for p := g.off[v]; p < g.off[v+1]; p++ {
					e := &g.edges[p]
					if c.comp[e.to] != ci {
						continue
					}
					tj := c.loc[e.to]
					switch {
					case onKey && e.kind == kWW && e.key == sKey:
						s.to = append(s.to, 2*tj)
					case e.kind == kPO || e.kind == kWR:
						s.to = append(s.to, 2*tj+1)
					default:
						continue
					}
					s.eid = append(s.eid, p)
				}
				s.off[st+1] = int32(len(s.to))
			}
		}
		src := 2 * c.loc[e0.to]
		parent, visited := s.reach(src)
		c.budget -= visited
		for _, r := range rws[i:j] {
			a := 2*c.loc[g.edges[r].from] + 1
			if parent[a] >= 0 {
				return append(s.globalPath(s.pathTo(parent, src, a)), r)
			}
		}
		if c.budget < 0 {
			c.incomplete = true
			return nil
		}
		i = j
	}
	return nil
}
