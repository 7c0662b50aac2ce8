package clock

// VC is a vector clock (Walter, FW-KV: notes/fwkv.md §3.1): entry i counts the transactions of
// site i that are included. Vectors of different lengths compare as if the shorter were padded
// with zeros, so a site added to a deployment does not invalidate older vectors.
type VC []uint64

// Copy returns an independent copy (nil stays nil).
func (v VC) Copy() VC {
	if v == nil {
		return nil
	}
	return append(VC(make([]uint64, 0, len(v))), v...)
}

// Merge sets v to the entrywise maximum of v and o, growing v if o is longer, and returns it.
func (v VC) Merge(o VC) VC {
	for len(v) < len(o) {
		v = append(v, 0)
	}
	for i, x := range o {
		v[i] = max(v[i], x)
	}
	return v
}

// LessEq reports whether v ≤ o entrywise: everything v includes, o includes too.
func (v VC) LessEq(o VC) bool {
	for i, x := range v {
		if x > o.at(i) {
			return false
		}
	}
	return true
}

// Less reports v ≤ o and v ≠ o: v happened before o.
func (v VC) Less(o VC) bool { return v.LessEq(o) && !o.LessEq(v) }

// Equal reports whether v and o include the same transactions.
func (v VC) Equal(o VC) bool { return v.LessEq(o) && o.LessEq(v) }

// Concurrent reports whether neither of v and o includes the other.
func (v VC) Concurrent(o VC) bool { return !v.LessEq(o) && !o.LessEq(v) }

func (v VC) at(i int) uint64 {
	if i < len(v) {
		return v[i]
	}
	return 0
}
