package crdb

import "github.com/meridiandb/meridian/internal/ts"

// Version garbage collection.
//
// Every leaseholder runs a txnkit.VersionGC over its store (created in NewNode, after the
// store is recovered, and kicked from flush, the node's one persist path): a pass at clock
// reading now collects with horizon now−gc-ttl, keeping for each key the newest committed
// version at or below the horizon and everything newer (mvcc gc.go). Every read and write at
// or above the horizon is therefore answered exactly as before, and every one below it is
// refused with cause too-old: a read at ReadTS (also one re-evaluated after waiting on an
// intent, and the re-read after an uncertainty refresh, which goes out at the new ReadTS), a
// write at WriteTS, and a refresh whose target To is below it (onRefresh says why a refresh
// from below the horizon to above it is still answered correctly). Commits, intent
// resolution, QueryIntent and pushes read no past versions and are never refused: a
// transaction that got its reads and writes in before the horizon passed them commits as
// before. The horizon is persisted ahead of the deletes it allows and recovered with the
// store, so a restarted leaseholder keeps refusing what its earlier life could no longer
// answer.

// refuseBelowGCHorizon is turned off only by tests, which show that without it an operation
// below the GC horizon is answered wrongly.
var refuseBelowGCHorizon = true

// belowGCHorizon reports whether an operation at t must be refused: versions it may need are
// gone.
func (n *Node) belowGCHorizon(t ts.Timestamp) bool {
	return refuseBelowGCHorizon && n.vgc.TooOld(t)
}
