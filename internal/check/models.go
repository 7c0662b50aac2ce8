package check

// A model is a set of edge kinds to build the dependency graph from, the direct anomalies it
// forbids, and the cycle searches whose hits it forbids. Every model forbids aborted reads (G1a),
// intermediate reads (G1b), internal inconsistency, duplicate appends, garbage reads and
// incompatible list orders; those are not repeated below.
//
//   - serializable: Adya PL-3 (Adya, Liskov & O'Neil, ICDE 2000): no cycle in ww ∪ wr ∪ rw
//     (G0, G1c, G-single, G2-item). Session order is not part of it, as in Adya and Elle.
//   - strict-serializable: serializable, and the order also respects real time (Sethi 1982; Elle's
//     "strict-serializable"): no cycle in ww ∪ wr ∪ rw ∪ rt.
//   - rls: region-linearizable serializability, notes/rls.md §1.2: serializable, no stale reads and
//     real-time order between transactions whose touched-region sets intersect. Checked as in
//     notes/rls.md §5.2: no cycle in ww ∪ wr ∪ rw ∪ rt_g, with one real-time barrier chain per
//     region g over the transactions relevant to g (no stale reads is implied, §1.2 note (a)).
//   - serializable-no-stale-reads: serializable, and no stale single-key reads (CockroachDB's
//     guarantee, notes/rls.md §3: its uncertainty intervals make a transaction that begins after
//     another's write of a key committed see that write): real-time order between two
//     transactions that touch a common key, one of them writing it. No cycle in ww ∪ wr ∪ rw ∪
//     rt_k, rt_k ordering a transaction that wrote k (or read it) before every later one that
//     reads or writes k (or writes it). Two reads of a key are not ordered: a later transaction
//     may read at a lower timestamp, finding one key's same value and older values of others,
//     and ordering the reads would turn that into a cycle. A serializable history may lose a
//     write nobody read before the loss; this model catches it at the first later read of the
//     key.
//   - snapshot-isolation: Cerone & Gotsman's characterisation quoted in notes/fwkv.md §1.2:
//     ((SO ∪ WR ∪ WW) ; RW?) acyclic, i.e. every cycle has two adjacent rw edges.
//   - psi: notes/fwkv.md §1.2: (SO ∪ WR ∪ WW)+ ; RW? irreflexive, i.e. every cycle has at least two
//     rw edges (which need not be adjacent: long fork is allowed).
//   - causal: transactional causal consistency, notes/wren.md §1.3–1.5 and the checker of §6.2.
//     Causal order HB = (SO ∪ WR)+. Forbidden: HB ∪ WW cyclic (causality and arbitration agree),
//     and a transaction reading a version of x older than one written by a transaction in its
//     causal past: a cycle rw_x ; ww_x* ; HB (this includes fractured reads, wren.md §6.2 item 2,
//     where HB is the single wr edge from the writer). Lost updates and write skew are allowed.
//   - opacity: strict serializability that also holds for the reads of aborted transactions
//     (notes/farmv2.md §1.2, Guerraoui & Kapalka): failed transactions that carry reads join the
//     graph as read-only nodes (wr edges in, rw edges out, real-time edges both ways).
//   - read-atomic: Bailis et al. (SIGMOD 2014) / Cerone et al. (CONCUR 2015): no fractured reads —
//     if T reads any write of U, T reads U's version (or a later one) of every key U wrote that T
//     reads — and, being above read committed, no G0/G1 cycle in ww ∪ wr.
type model struct {
	name string
	// kinds are the edge kinds the dependency graph is built from.
	kinds kindMask
	// order is the extra order kind (po or rt) the model adds to ww/wr/rw, if any.
	order kindMask
	// regionRT selects per-region real-time chains instead of one global chain.
	regionRT bool
	// keyRT selects per-key real-time chains that order a key's writers before its later
	// accessors and its accessors before its later writers (not reads before reads).
	keyRT bool
	// abortedReaders puts failed transactions' reads in the graph and counts their anomalies.
	abortedReaders bool
	// forbidLostUpdate reports two committed transactions that read the same version of a key and
	// both wrote it.
	forbidLostUpdate bool
	// fractured runs the direct fractured-read check.
	fractured bool
	// wrFromEveryAppend adds a wr edge to a list read from the writer of every append it shows,
	// not only the last: the causal past (SO ∪ WR)+ must hold them all (a fractured read of an
	// earlier element's writer passed under causal).
	wrFromEveryAppend bool
	// searches run in order on each strongly connected component; the first hit is reported.
	searches []search
}

// search kinds.
type searchKind uint8

const (
	// anyCycle: a cycle using only edges in mask.
	anyCycle searchKind = iota
	// oneRW: a cycle with exactly one rw edge, the rest in mask.
	oneRW
	// nonAdjacentRW: a cycle in which no two rw edges are adjacent (forbidden by SI).
	nonAdjacentRW
	// causalPattern: rw_x ; ww_x* ; (po ∪ wr)+.
	causalPattern
)

type search struct {
	kind searchKind
	mask kindMask
}

var (
	dataNoRW = kWW | kWR
	data     = kWW | kWR | kRW
)

// serialSearches finds the most specific cycle first: G0, then G1c, then G-single, then any.
func serialSearches(order kindMask) []search {
	s := []search{{anyCycle, kWW}, {anyCycle, dataNoRW}}
	if order != 0 {
		s = append(s, search{anyCycle, dataNoRW | order})
	}
	s = append(s, search{oneRW, dataNoRW})
	if order != 0 {
		s = append(s, search{oneRW, dataNoRW | order})
	}
	s = append(s, search{anyCycle, data})
	if order != 0 {
		s = append(s, search{anyCycle, data | order})
	}
	return s
}

var allModels = []*model{
	{name: "serializable", kinds: data, forbidLostUpdate: true, searches: serialSearches(0)},
	{name: "strict-serializable", kinds: data | kRT, order: kRT, forbidLostUpdate: true, searches: serialSearches(kRT)},
	{name: "rls", kinds: data | kRT, order: kRT, regionRT: true, forbidLostUpdate: true, searches: serialSearches(kRT)},
	{name: "serializable-no-stale-reads", kinds: data | kRT, order: kRT, keyRT: true, forbidLostUpdate: true, searches: serialSearches(kRT)},
	{name: "snapshot-isolation", kinds: data | kPO, order: kPO, forbidLostUpdate: true, searches: []search{
		{anyCycle, kWW}, {anyCycle, dataNoRW}, {anyCycle, dataNoRW | kPO},
		{oneRW, dataNoRW}, {oneRW, dataNoRW | kPO},
		{nonAdjacentRW, data | kPO},
	}},
	{name: "psi", kinds: data | kPO, order: kPO, forbidLostUpdate: true, searches: []search{
		{anyCycle, kWW}, {anyCycle, dataNoRW}, {anyCycle, dataNoRW | kPO},
		{oneRW, dataNoRW}, {oneRW, dataNoRW | kPO},
	}},
	{name: "causal", kinds: data | kPO, order: kPO, wrFromEveryAppend: true, searches: []search{
		{anyCycle, kWW}, {anyCycle, dataNoRW}, {anyCycle, dataNoRW | kPO},
		{causalPattern, data | kPO},
	}},
	{name: "opacity", kinds: data | kRT, order: kRT, abortedReaders: true, forbidLostUpdate: true, searches: serialSearches(kRT)},
	{name: "read-atomic", kinds: data, fractured: true, searches: []search{
		{anyCycle, kWW}, {anyCycle, dataNoRW},
	}},
}

// withoutRealtime is m with its real-time order dropped, for a history without times: the same
// name (every cycle it finds breaks m too) and the same rules otherwise.
func (m *model) withoutRealtime() *model {
	c := *m
	c.kinds &^= kRT
	c.order &^= kRT
	c.regionRT, c.keyRT = false, false
	c.searches = nil
	for _, s := range m.searches {
		if s.mask&kRT == 0 {
			c.searches = append(c.searches, s)
		}
	}
	return &c
}

// untimedModels lists the models that need no real-time order.
func untimedModels() []string {
	var out []string
	for _, m := range allModels {
		if m.kinds&kRT == 0 {
			out = append(out, m.name)
		}
	}
	return out
}

var modelByName = func() map[string]*model {
	m := map[string]*model{}
	for _, x := range allModels {
		m[x.name] = x
	}
	return m
}()

// Models lists the model names Check accepts.
func Models() []string {
	out := make([]string, len(allModels))
	for i, m := range allModels {
		out[i] = m.name
	}
	return out
}
