// Package crdb is the CockroachDB-style baseline: K2's MVTO-HLC (notes/k2.md §4) and RLS's CRDB
// baseline (notes/rls.md §3.3). It is registered as protocol "crdb" and promises the
// checker's "serializable-no-stale-reads": serializable, and like CockroachDB no stale
// single-key reads (a transaction sees every write to a key it touches that committed before
// it began, thanks to the uncertainty interval), but no real-time order between transactions
// on disjoint keys. Plain serializability would accept a lost acknowledged write that no read
// had seen (it can be ordered last), which a crash review showed it did. RLS's
// CRDB-RLS (notes/rls.md §3.4) is meant to be built on this package: the coordinator
// (coord.go), the leaseholder (replica.go) and the record holder (record.go) are separate
// pieces, and every timestamp bump of a transaction goes through Node.refresh.
//
// # Roles
//
// Every data node is a gateway (coordinator) for its region's clients, the leaseholder of its
// primary shards, and the holder of the transaction records anchored on those shards. There
// are no oracles: Layout turns them off.
//
// # The protocol
//
//   - Begin. The coordinator takes ts = HLC.Now() (the HLC is fed by env.Now and updated with
//     every timestamp a message carries). readTS = writeTS = ts; the global uncertainty limit is
//     ts + max-offset. The transaction's priority (age) is the begin timestamp of the client's
//     first attempt, kept across retries so old transactions win eventually. The gateway keeps
//     an age between an abort and the client's next begin only, and for an idle timeout at
//     most, so what it holds is bounded by the clients recently aborted, not by all it has
//     seen (coord.go, begin).
//   - Read k at readTS (leaseholder). The transaction's own intent wins. Another transaction's
//     intent at or below readTS is a conflict (see Conflicts). A committed value in
//     (readTS, limit] is uncertain: the coordinator moves the transaction up to the value's
//     timestamp, refreshing its earlier reads, and reads again; if the refresh fails the
//     transaction aborts with cause "uncertainty" (the client retries, and the retry begins
//     above the value because the coordinator's HLC learned it). The limit is narrowed by the
//     leaseholder's observed timestamp (its clock reading at the transaction's first visit),
//     as CockroachDB does. A successful read raises the key's timestamp-cache entry to readTS.
//   - Write k (leaseholder). One intent per key. The intent goes at
//     max(writeTS, tscache(k).Next(), newest committed version.Next()) — a write below a later
//     read, or below a newer value (WriteTooOld), is pushed. The timestamp cache remembers which
//     transaction set each entry so that a transaction is not pushed by its own read. A write
//     of a key the transaction read, where another transaction has since committed a value
//     above its readTS, is refused instead (cause "write-too-old"): the commit's refresh of
//     that read could only fail, and CockroachDB too fails the refresh there (WriteTooOldError)
//     rather than lay an intent that holds the key until the commit finds out. The first
//     write also creates the PENDING transaction record on its leaseholder; the coordinator
//     then heartbeats the record. With write pipelining (default) the leaseholder answers as
//     soon as the intent is in memory; its persistence runs in the background and commit
//     proves it.
//   - Commit. If writeTS > readTS the reads are refreshed: every read key must have no other
//     transaction's committed value in (readTS, writeTS] and no other intent at or below
//     writeTS; success raises their tscache entries to writeTS, failure aborts with cause
//     "refresh-failed" (with read-refresh=off every such refresh fails at once, counted
//     refresh/off: MVTO without refresh, which k2-fig17 runs beside the default). Then, with
//     parallel commits (default), the coordinator sends a STAGING record listing all written
//     keys and, in parallel, one QueryIntent per leaseholder listing its writes; the
//     transaction is implicitly committed once the STAGING record and every intent (at or
//     below the commit timestamp) are durable, and the client is told then. The record is
//     then marked COMMITTED, and its holder resolves the intents asynchronously once
//     that is durable. Without parallel commits the writes are proven first, the record is
//     then written COMMITTED, and the coordinator resolves the intents on the answer. Either
//     way no intent is resolved as committed under a record that is not durably COMMITTED,
//     so a recovery of a STAGING record finds every write it needs as an intent, which version
//     GC never removes (a resolved version it may: coord.go, committed).
//     If the record holder answers that the transaction was pushed (below), the coordinator
//     refreshes to the pushed timestamp and stages again.
//   - Read-only transactions have no record; they commit at readTS with no message.
//   - Batches. A client request with several operations (OpBatch) runs them concurrently, all
//     reads at one readTS and all writes at one writeTS, as DistSender runs a BatchRequest's
//     parts. The operations for one leaseholder travel as one OpsReq and are answered by one
//     OpsResp (more if its values pass 4 MiB) once every one of them is done (a lone operation
//     keeps its ReadReq/WriteReq);
//     each sub-request is evaluated exactly as if it had come alone, so only the message count
//     changes. An OpsReq's intents are persisted with one flush. Refresh, QueryIntent and
//     intent resolution likewise send one message per node, listing its keys.
//
// # Conflicts, pushes and deadlock freedom
//
// A request that meets another transaction's intent queues on the key at the leaseholder and
// pushes the intent's transaction at its record holder (the record's node is kept in the
// intent's metadata):
//
//   - An older writer aborts a PENDING holder (PUSH_ABORT; the holder later sees cause
//     "push-abort").
//   - An older reader pushes a PENDING holder's timestamp above its read (PUSH_TIMESTAMP: the
//     record keeps a durable push floor below which the transaction may not stage, and the
//     intent is moved up); an intent in the reader's uncertainty interval is pushed past the
//     observed limit.
//   - A younger request waits (PUSH_QUERY), re-asking every heartbeat interval.
//   - A STAGING holder may already be committed: it is neither aborted nor pushed, only waited
//     for — and recovered if its coordinator is silent.
//
// Every wait edge therefore goes from a younger transaction to an older one or to a STAGING
// one, and STAGING transactions wait for nothing but disks, so no cycle (deadlock) can form.
// When the intent is resolved (or pushed), the queue is re-evaluated oldest transaction first,
// so the key goes to the waiter no other waiter may abort; re-evaluating in arrival order
// handed it to the first arrival, which every older waiter behind it then aborted, a convoy
// that more than halved YCSB-T throughput (replica.go, wake).
//
// A record whose coordinator has not heartbeated for 5 heartbeat intervals is expired: a push
// aborts it if PENDING. A STAGING record is recovered once its coordinator has been silent for
// a heartbeat interval and a retransmission timeout (its explicit commit was lost, or the
// coordinator: stagingSilent), by a push or the holder's tick: query each in-flight write with
// "prevent" (a missing write is made impossible at or below the staging timestamp by raising
// the key's tscache, so the answer cannot change; all present → COMMITTED, else ABORTED) and
// resolve the intents.
//
// # Version garbage collection
//
// Superseded versions do not stay for ever: each leaseholder keeps every version a transaction
// younger than gc-ttl (default 10 s) may read and collects the rest, in passes about ten times
// per TTL (txnkit.VersionGC, mvcc gc.go): per key, the newest committed version at or below the
// horizon (clock − gc-ttl) and everything newer stay. A read or write below the leaseholder's
// horizon, and a refresh to a timestamp below it, is refused and the transaction aborts with
// cause "too-old", as CockroachDB refuses a batch below its GC threshold; read-only
// transactions too. A refresh from below the horizon to above it is still answered correctly
// (the version GC keeps at the horizon stands in for every conflict it removed; onRefresh). A
// transaction therefore has gc-ttl, less however far its gateway's clock lags the
// leaseholder's, to get its reads and writes in; committing and resolving are never refused.
// gc-ttl must be at least 2×max-offset, so that a gateway lagging by max-offset still leaves
// its transactions max-offset (checkGCTTL). The horizon is persisted ahead of the deletes it
// allows, so a restarted leaseholder keeps refusing (versiongc.go).
//
// # Crashes
//
// Intents, records and push floors are persisted (push floors under the 'p' key prefix)
// before anything depending on them is acknowledged, except pipelined intents, which commit
// proves. After a restart the timestamp cache (volatile) is replaced by a floor of the local
// clock + 2×max-offset, above every read any node could have served before the crash. A write
// pushed to that floor has a timestamp no clock has reached yet, so its gateway waits until its
// clock passes the commit timestamp before acknowledging (as CockroachDB waits out a commit
// timestamp in the future): a read begun afterwards anywhere then has it in its uncertainty
// interval. A pipelined write acknowledged before its intent was durable is lost with the
// crash: its transaction's commit proof finds it missing, and so does a later read or scan of
// the key by the transaction, which says it wrote there (ReadReq.OwnWrite, ScanReq.OwnKeys)
// and is refused (cause write-lost) rather than answered with the value below the lost write;
// answered, the transaction read past its own write and still committed when it wrote the key
// again (TestReadOwnLostPipelinedWrite). A node's first life takes no floor: it serves no
// other node's request until its incarnation is durable, so a crash before that leaves nothing
// it could have read.
// Transaction ids are (coordinator, incarnation, counter), as K2's and Spanner's: each life
// persists its incarnation number before handing out an id (client requests wait until then),
// so a restarted coordinator never takes an id whose records, intents, push floors or
// timestamp-cache entries an earlier life left behind, whatever its clock reads. A client
// request other than a transaction's first (Seq > 0) for a transaction the coordinator does not
// hold, an earlier life's or one the idle timeout dropped, aborts it (unknown-transaction):
// begun afresh, it would commit only the writes from that request on. A first request numbered
// at or below a transaction of the same client that ended here is a late copy (clients number
// their transactions increasingly) and is refused too, rather than begin a transaction no
// client drives, its intents blocking until the idle timeout (txnkit.EndedTxns; counted as
// late-first-request).
// A restarted node tells every other node (Restarted, once its incarnation is durable), and
// each sends it again every request it still awaits an answer to: what the earlier life had
// not answered is lost, and what came while it was down was dropped. CockroachDB's DistSender
// retries the same way once the range is back. Without it, a transaction whose request was
// swallowed waited for its idle timeout (5 s), its intents and live record blocking every
// transaction behind them (TestRequestsResentAfterRestart). The notice also tells record
// holders that the transactions the node's earlier lives coordinated can hear nothing more from
// their coordinator: their records count as silent at once, so the next push aborts (or
// recovers, if STAGING) them instead of waiting out the expiry; the restarted node does the same
// for its own records as it recovers (TestRecordsOfRestartedCoordinatorExpire,
// TestRestartedCoordinatorsRecordsExpireAtOnce).
//
// # Lost and duplicated messages
//
// The network may lose or duplicate any message between nodes (node.go's contract). Every
// request that awaits an answer (read, write, refresh, intent query, stage, commit without
// parallel commits, push, recovery query) is sent again, from the heartbeat tick, once it has
// gone unanswered for its retransmission timeout: RFC 6298's first one with the topology's
// round trip to that node as the sample and the tick as the clock granularity, RTT +
// max(heartbeat, 2×RTT), doubled at each resend up to the record expiry (Node.rto, retransmit).
// A lost message so costs a timeout and at most a tick more (200 to 480 ms on the k2 presets)
// instead of the idle timeout, during which the transaction's intents blocked its keys. Requests
// are idempotent where they land: a write already evaluated is answered from its intent or
// committed version (writeDone), a copy of a request still waiting on an intent is dropped
// (waitingHere), staging again stages the same record, a commit of a forgotten committed record
// is answered committed; the first answer wins. What is sent once stays so, each loss covered
// by a mechanism with its own period: heartbeats (5 may go before a record expires), the
// explicit commit after a parallel commit (the STAGING record is recovered a heartbeat and a
// retransmission timeout after its coordinator falls silent), rollbacks and resolutions (a push finds the decision), Resolved
// and EndedQuery (asked again every expiry). Late copies of a finished transaction's messages
// neither lay its intents again nor re-open its record (gc.go). Without faults, only requests
// that wait on an intent longer than their timeout are sent again (a sender cannot tell a wait
// from a loss).
//
// # Simplifications against CockroachDB, and why
//
//   - No Raft: a shard has one copy (its leaseholder), and "replicated" means persisted by
//     env.Persist. Pipelining and parallel commits keep their meaning (acknowledge before
//     durable; commit once the record and the writes are durable).
//   - Interactive clients cannot be replayed by the gateway, so a transaction restart is an
//     abort the client retries (CockroachDB retries internally when it can).
//   - The last writes are not batched with EndTxn: the client already waited for every write's
//     evaluation, so "in parallel with the last writes" means in parallel with their
//     persistence, which is what the latency model sees.
//   - Conflict handling is push-by-age rather than CockroachDB's lock-table wait queues with
//     distributed deadlock detection: simpler, deadlock-free by construction, and it keeps
//     K2's observation that MVTO-HLC blocks on write-write conflicts.
//   - No "local timestamps" (CockroachDB v22.2): a value whose intent was resolved to a pushed
//     timestamp after a reader first visited its node may fall outside the reader's observed
//     limit. That can only cost single-key linearizability in a narrow window, never
//     serializability, which rests on commit-timestamp order alone.
//   - No closed timestamps or follower reads. Range scans (scan.go) go to the leaseholder of
//     their routing prefix when they stay in one, else to every leaseholder (keys are
//     hash-partitioned by prefix, not range-partitioned as CockroachDB's are), are evaluated in
//     one step each (CockroachDB's latches), stop at their row limit, and put the span read in
//     the timestamp cache and the refresh set; at most 256 spans are kept per node, older ones
//     folded into its read floor.
//   - Transaction records are forgotten when nobody can validly ask about them any more, not
//     after CockroachDB's hour of inactivity: a committed one once every leaseholder of its
//     writes has acknowledged that its resolution is durable (Resolved) and its coordinator has
//     ended the transaction (for a commit it waited for, once the answer reached it), an
//     aborted one once its coordinator has ended it (EndedQuery, Ended). gc.go says why no late message about a forgotten transaction can be answered
//     wrongly. Record holders also recover a silent STAGING record without waiting for a
//     push, and ask the coordinator of an expired PENDING one whether it ended it.
//
// # Options
//
//	max-offset=500ms        maximum clock offset the uncertainty interval covers
//	heartbeat-interval=200ms coordinator heartbeat; records expire after 5 intervals
//	idle-timeout=5s         abort a transaction whose client (or operation) hangs this long;
//	                        a commit that hangs this long answers "unknown"; a client that
//	                        comes back after it gets cause "unknown-transaction", never a
//	                        fresh transaction under the old one's name
//	write-pipelining=on     acknowledge writes before their intents are durable
//	parallel-commits=on     STAGING record in parallel with proving the writes
//	gc-ttl=10s              keep superseded versions this long (10ms to 1000h, at least
//	                        2×max-offset: checkGCTTL); refuse a transaction older than that
//	                        (cause too-old)
//	mutant=no-refresh       commit at a pushed timestamp without refreshing the reads (caught
//	                        by the serializable checker as lost updates / G0 / G2)
//	mutant=no-span-tscache  scans leave no timestamp-cache entry, so a write can land under a
//	                        finished scan (TestScanNoPhantoms catches the phantom)
//	mutant=early-stage      a record holder answers a STAGING record before it is durable: a
//	                        crash can then lose a commit the client was told of (valid without
//	                        faults; with crashes the final read and the checker catch it:
//	                        TestDurabilityMutantsCaughtByCrashes in cmd/meridian)
//
// # Metrics (protocol.MetricsSource)
//
// Counters: abort/<cause> (push-abort, refresh-failed, write-too-old, uncertainty, write-lost,
// coordinator-timeout, too-old, unknown-transaction), refresh/ok and refresh/failed,
// uncertainty/hit, /refreshed and /restart, push/abort, /timestamp, /wait and /expired,
// deadlocks (transactions a record holder aborted for an older writer's push, each victim once:
// the deadlocks CockroachDB's wait queues would form and break, avoided by age as spanner's
// wound-wait avoids them, and counted like its wounds; expired records are not counted),
// scan/keys (keys visited by scans), scan/marks-evicted (span entries folded into the read
// floor), write/pushed, commit/ok, /read-only, /pushed and /unknown, commit/recovered (a staged
// transaction a proof found a write of missing, which its holder had recovered as committed:
// coord.go, abortStaged), read/own-write-lost (reads and scans refused because a crash lost the
// transaction's acknowledged pipelined write of the key), recovery/committed and /aborted,
// record/forgotten, record/ended-query (transactions a holder asked their coordinator about),
// record/ended-abort (undecided records aborted because the coordinator had ended the transaction),
// record/coordinator-restarted (records counted silent because their coordinator's node
// announced a restart: that earlier life can send nothing more), record/abort-reaffirmed
// (records aborted again on a heartbeat whose coordinator knew of the abort a crash lost),
// record/reresolve (resolutions re-sent by a holder), record/late-heartbeat (copies of a
// heartbeat that came after the record was forgotten, dropped), rpc/resent (requests sent again
// to a node that restarted), rpc/retransmitted (requests sent again, unanswered for their
// retransmission timeout), gc/passes, gc/versions-removed and gc/keys-removed (version garbage collection).
// Durations: phase/<client op> (get, put, delete, commit: request to answer at the gateway),
// phase/refresh, phase/stage (staging to implicit commit), phase/lock-wait (time a request spent
// queued on an intent).
package crdb
