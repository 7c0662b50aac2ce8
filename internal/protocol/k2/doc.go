// Package k2 implements K2 (Song et al., PVLDB 18(6), "K2: Optimizing Distributed Transactions in a
// Multi-region Data Store with TrueTime Clocks"; notes in papers/notes/k2.md): strictly
// serializable interactive transactions ordered by start timestamps from per-region TrueTime
// oracles. It is Meridian's default protocol. Only K2-TB and K2-MVTO are implemented; K2-VCR
// (epochs and replica reads) is not, so every read and write goes to a key's primary.
//
// # Roles
//
// Every data node is at once a coordinator (for the clients attached to it), the primary of its
// shards, and the recorder of the transactions whose first write it received. Oracle nodes run
// clock.OracleHandler. Node ids are the coordinator ids of K2-TB timestamps.
//
// # A transaction
//
//  1. Timestamp (K2-TB, notes §3.2). The first request of a transaction queues for a timestamp
//     from the coordinator's clock.Batcher; one oracle request at a time is in flight per
//     coordinator and serves every queued transaction. The batch is valid for TTL counted on the
//     local clock from the request's send (shortened by the drift bound), and each timestamp
//     brings a commit wait CWT = 2·(TTL+ε)·(1+D) counted from the moment it was taken. The
//     timestamp is at once the transaction's serialization point and the version of its writes.
//  2. Reads (Fig. 10 READ). The key's primary returns the newest committed version below the
//     reader's timestamp and raises the key's read watermark (RT) to it. An undecided intent
//     below the reader's timestamp is resolved by PUSHWS first: the data node asks the writer's
//     recorder, which answers only once the decision is durable; the reader then looks at the
//     key afresh. Intents above the reader's timestamp are skipped. Readers abort for no
//     conflict (only when a wait outlasts the coordinator's op-timeout). The read registers in
//     RT when it takes its value (option read-mark=value, the default), not while it waits:
//     see onRead for why and for read-mark=arrival.
//  3. Writes (Fig. 10 WRITE). The one conflict abort of K2-MVTO: a write whose timestamp is below
//     the key's RT aborts (cause "read-watermark"). Otherwise the write adds an intent to the
//     key's write stream, which may hold intents of many transactions (no write-write blocking).
//     With write pipelining (the default) the write is acknowledged as soon as the intent is in
//     memory and the intent is persisted in the node's next group commit. When a flush
//     completes the node tells each coordinator, in one DurableNotes message per coordinator
//     per flush (not one per write), which of its writes are now durable; a coordinator still
//     missing some at commit asks again (DurableReq, answered when they are on disk). Without
//     pipelining, the write is acknowledged only once the intent is persisted.
//  4. Commit. The coordinator first waits until every write of the transaction is durable (K2's
//     first flush of a commit: "to commit a read-write transaction, K2-MVTO takes at least two
//     SSD flushes (one for write operations and another for recording commit status)"), then
//     what remains of the commit wait, then sends one COMMIT to the recorder, which persists
//     COMMITTED and answers (one-phase commit; the decision point, the second flush).
//     The client hears of the commit, then the participants finalize asynchronously; readers
//     that meet a not-yet-finalized intent learn the decision through PUSHWS and finalize it on
//     their node (lazy cleanup).
//  5. Read-only transactions take a timestamp, read like any transaction (raising RT), create no
//     record and have no commit round; they honour the commit wait before answering the commit
//     (option ro-commit-wait, default on, as the notes recommend).
//
// A client request may carry several reads and writes of distinct keys (wire.OpBatch: the
// client's GetMany, PutMany and Batch), as K2's TPC-C issues a transaction's independent
// operations concurrently. The coordinator sends them all at once, one message per data node
// (OpsReq, so a batch costs a node one request whatever its size, as spanner's participants are
// sent theirs), and answers when the last is back; a write's node is a participant from the
// moment the write is sent, so an abort reaches an intent whose answer is still on its way. The
// node answers in one OpsResp what it served at once, and in one more what had to wait (a read
// parked on PUSHWS, a write waiting for its flush without pipelining), so that no answer waits
// for another's wait (each cut into more when its values pass 4 MiB, to fit a frame); a refusal
// goes back alone and at once. The Table 2 read and write phases
// count operations that ran concurrently once (the request's time, less its longest PUSHWS
// wait).
//
// An aborted transaction is retried by the client as a new transaction, which takes a new
// timestamp here: a timestamp is never reused.
//
// # Invariants
//
//   - Property 4.1: abs(start) < ts < abs(end) for every transaction; enforced by clock.Batcher
//     (see the clock package comment) plus this coordinator never answering a commit before the
//     commit wait has elapsed on its clock. Because the recorder's commit point follows the wait,
//     no reader can see a version whose timestamp is ahead of true time.
//   - Serialization order is timestamp order: a read registers in RT in the same event as it
//     takes its value (a scan marks its range before reading it), so no version below a read
//     can appear afterwards, and a reader waits for every undecided lower intent, looking at
//     the key afresh after each wait. Every wait-for edge (PUSHWS) points to a smaller
//     timestamp: no deadlocks.
//   - A decision is visible only once durable (txnrec), and final: a recorder that aborted a
//     transaction rejects its commit.
//   - No decision is persisted, and no commit reported, while an intent of the transaction is not
//     durable. With write pipelining intents are acknowledged from memory, so a data node may
//     crash with acknowledged intents of an undecided transaction off disk. The coordinator
//     aborts such a transaction (cause "write-lost"): the node's WriteDurable after restart
//     says the intent is not in its store (the coordinator re-asks with DurableReq every
//     op-timeout/8 while it waits, and gives up with cause "timeout" after op-timeout), or a
//     participant answers from another incarnation than it first did. Writes are numbered per
//     transaction (WSeq, kept in the intent's metadata), so a key written twice is durable only
//     when its last write is; a data node takes no write older than the intent the transaction
//     has on the key, so a late duplicate cannot bring an overwritten value back. Readers that met an in-memory intent only PUSHWS its recorder,
//     which cannot commit before the coordinator knows every intent durable; the record itself
//     is created by the first write, whose durability covers it.
//   - Without write pipelining intents and records are persisted before they are acknowledged.
//     RT is volatile, and a
//     restarted data node raises a node-wide read floor above any timestamp a pre-crash reader
//     could have used before it serves anything.
//
// # Deviations from the paper, and why
//
//   - TTL defaults to 500 µs instead of 100 µs. TTL must exceed the oracle round trip or every
//     batch arrives expired; Meridian's topologies put 0.2 ms between nodes of one region (K2's
//     Table 1), against the paper's 18 µs oracle fetch. CWT grows accordingly (≈1.2 ms).
//   - Timestamp uniqueness (notes §3.2, recommended fix): the coordinator id is the timestamp's
//     Origin and a per-coordinator guard bumps Logical when batches overlap (clock.Batcher).
//   - Transaction ids are (coordinator, incarnation, counter); the incarnation is persisted at
//     start-up, so a restarted coordinator never reuses an id its previous life left in a write
//     stream. The paper does not discuss ids apart from timestamps. Request ids, by which
//     answers are matched, carry a durable number the same way (2^40 requests under one, a new
//     number taken when half are spent), so that an answer to an earlier life's request never
//     passes for one of this life's; a transaction needing one when none is left aborts
//     (cause "request-ids-spent").
//   - Recorder placement (notes §3.5): the primary of the transaction's first written key; the
//     record is created by that write, which carries the recorder's address to every intent.
//   - PUSHWS before the record exists (notes §3.5): the recorder creates an IN_PROGRESS
//     placeholder bounded by the lease; if nobody vouches for the transaction it is aborted.
//     The recorder also asks the transaction's coordinator at once (EndedQuery), and aborts the
//     placeholder as soon as the coordinator says it no longer runs the transaction.
//   - Coordinator failure: coordinators heartbeat, to each recorder, the transactions they still
//     run (every lease/4); a recorder aborts an undecided transaction not heard of for a lease.
//   - A coordinator aborts a transaction whose client has sent nothing for idle-timeout
//     (default 5 s), telling no one: the client waits for no answer. The client's next request
//     of it (Seq > 0), like one of a transaction an earlier life held, aborts (cause
//     "unknown-transaction", retryable) instead of beginning a fresh transaction under its
//     name, which would commit only the writes from that request on while the client took the
//     commit for all of them (txnkit.AnswerUnheld). A first request that commits or aborts
//     (nothing was done) is answered OK. A first request numbered at or below a transaction of
//     the same client that ended here is a late copy (clients number their transactions
//     increasingly) and is refused too, rather than begin a transaction no client drives
//     (txnkit.EndedTxns).
//   - Records are forgotten (the paper keeps them in shared storage and says nothing of their
//     end): a committed one once every participant has acknowledged that its finalization is
//     durable (Finalized), an aborted one once its coordinator has ended the transaction. A
//     recorder re-sends a commit's finalization to a participant that has not acknowledged it
//     for a lease, once the coordinator has ended the transaction. gc.go says why no late
//     message about a forgotten transaction can be answered wrongly.
//     The paper gives no values; the lease defaults to 1 s. Recorder fail-over with fencing in
//     shared storage is replaced by the recorder's own restart from its durable records, which is
//     what Meridian's runtimes offer.
//   - Commit wait precedes the recorder's commit (the notes' choice for the paper's ambiguity).
//   - A read waiting on a PUSHWS re-sends it every lease, since recorders do not persist waiters.
//   - An outcome the coordinator cannot learn (the recorder does not answer the commit after
//     three tries) is reported as CodeUnknown; a read or write with no answer within op-timeout
//     aborts the transaction (cause "timeout").
//   - Lost operations (lostops.go; the paper assumes a reliable network): an operation
//     unanswered for its retransmission timeout (the round trip to its node plus the larger of
//     op-timeout/8 and twice that, doubling) is asked about with an OpsProbe; one the node does
//     not hold, while its answer is still awaited, was lost on the way or its answer was, and is
//     sent again (reads, idempotent writes and scan shares all may be). Under 2% loss between
//     nodes, list-append committed 442/420/580 at seeds 1-3 where it committed 200/260/145 when
//     every loss waited out op-timeout.
//   - Data-node failure as a coordinator sees it (the paper recovers the node from shared
//     storage and says nothing of the operations it held): a crash loses the reads parked on
//     PUSHWS and the writes waiting for their flush, which will never be answered. A data node
//     that restarts tells every other data node so when its new life starts (Restarted, one
//     message per peer per restart). A coordinator with operations out at it sends it one
//     OpsProbe naming them; the node answers at once, also while it recovers, which of them it
//     does not hold (it keeps, in volatile memory, the operations it received and has not
//     answered, and counts the requests it holds until its read floor is set). Links are FIFO,
//     so the probe reaches the node after every operation it names and its answer comes back
//     after the answer of every operation the new life served: an operation it does not hold
//     was lost with an earlier life (or on the way) and the transaction aborts (cause
//     "op-lost"), a few WAN trips after the restart rather than at op-timeout. Operations the
//     new life received are unaffected, whenever they were sent. The abort retries nothing, so
//     no write is applied twice, and what the lost operations left is cleaned up as after any
//     abort. A second restart before the probe is answered sends a second notice, whose probe
//     replaces the first. A node that stays down, or is cut off, says nothing, and its
//     operations cost the whole op-timeout (cause "timeout"): nothing guesses from silence that
//     a node is dead, because a guess tight enough to help took a node that merely answered
//     late for a dead one and aborted healthy transactions (with op-timeout 240 ms, a third of
//     a cross-region YCSB-T run). A run without crashes sends no notice and no restart probe;
//     the loss probes above only send lost operations again and never abort. FIFO is assumed, not checked: the
//     simulator can reorder messages (sim.Config.Reorder), which no k2 test or command
//     enables, and the real runtime's links are FIFO per connection, but a restarted node
//     answers on a new one. Where a probe overtakes an operation, or the new life's answer an
//     answer of the old life, a transaction aborts for nothing: an abort, never a wrong
//     result. A node that crashes before its first incarnation is durable restarts as new and
//     sends no notice.
//   - Write pipelining is the paper's behaviour as its Table 2 and two-flush commit imply (a
//     NewOrder's whole write phase ≈ 0.55 ms, one RTT plus one flush, for ~25 writes), though
//     the paper does not describe the mechanism; acknowledging each write after its own flush
//     made a NewOrder's writes cost ~25 sequential flushes. write-pipelining=off keeps that
//     behaviour for comparison.
//   - Range scans (scan.go) are ours: the paper has point reads only and leaves phantom
//     protection for ranges open (notes §3.3). A scan is a point read of every key in the range
//     at every shard's primary that may hold keys of it (one, for a range within one routing
//     prefix; else all data nodes, keys being hash-partitioned by prefix), plus a read
//     watermark on the range itself, checked by every write like a key's: no write below the
//     scan's timestamp lands in the range after it, so no phantom appears under it. A scan
//     with a row limit reads, and marks, only as far as its limit needs, in steps. A node
//     keeps at most 256 range watermarks (a step continuing its scan's mark extends it) and
//     folds older ones into its read floor. mutant=no-scan-watermark drops them
//     (TestScanNoPhantoms catches it). Meridian's TPC-C still uses point reads.
//   - No K2-VCR: no epochs, no replica reads; records carry no commit epoch.
//   - Old versions are garbage-collected (the paper keeps its immutable log and says nothing of
//     its growth): a data node keeps every version a transaction younger than gc-ttl (default
//     10 s) may read, collects the rest (txnkit.VersionGC, mvcc gc.go), and refuses any read or
//     write below its horizon with cause "too-old", also a read whose PUSHWS wait outlasted it.
//     A transaction therefore has gc-ttl to finish. The horizon is persisted with the deletes
//     it allows, so a restarted node keeps refusing (TestReadBelowGCHorizonRefused); with the
//     refusal switched off the checker finds G-single cycles (TestVersionGCHistories).
//
// # Ablations (Fig. 19) and mutants
//
//   - mv-reads=off: a reader blocks on any intent of another transaction on the key, whatever its
//     timestamp. Waiting on a younger writer can deadlock, so such a wait aborts after
//     read-block-timeout (cause "read-blocked").
//   - mv-writes=off: at most one intent per key (mvcc SingleIntent); a second writer aborts
//     (cause "write-intent"), as the paper's "single write intent" variant gives no wait policy.
//   - async-finalize=off: the coordinator finalizes every participant and waits for their
//     acknowledgements before answering the commit.
//   - ts-batching=off: the strawman of Fig. 3, one oracle request per transaction.
//   - write-pipelining=off: each write is acknowledged only once its intent is durable, so a
//     transaction's writes pay one flush each, sequentially, and commit has no durability wait.
//   - mutant=no-commit-wait skips the commit wait; mutant=ttl-wrong-drift applies the drift to
//     the batch TTL in the unsafe direction. Neither is observable with honest clocks and
//     transactions longer than CWT; skew an oracle ahead of true time (sim.SkewClock) and the
//     checker finds real-time violations (TestMutantCaught).
//   - mutant=early-commit: a recorder answers a commit before the decision is durable. Valid
//     without faults; a crash of the recorder during the flush loses a commit the client was
//     told of (TestDurabilityMutantsCaughtByCrashes in cmd/meridian).
//
// # Metrics
//
// Counters: commit, commit.read-only, commit.unknown, abort.<cause> (write-lost: a crash lost an
// acknowledged intent; unknown-transaction: a request of a transaction the coordinator no
// longer holds), late-first-request (a copy of a first request arriving after its
// transaction ended, refused: txnkit.EndedTxns), pushws (PUSHWS sent), write-duplicate (a data
// node received a write of a transaction it already has, or an older one, on the key: a
// duplicated message), probe.loss (OpsProbes about operations past their retransmission
// timeout), op.resent (operations a loss probe found missing and sent again), scan.keys (keys a data node visited for scans), scan.marks-evicted
// (times a node folded its range watermarks into its read floor),
// probe (OpsProbe sent, after a restart notice), abort.op-lost (a data node's crash lost an
// operation), recorder.lease-abort, recorder.ended-abort (an undecided transaction aborted because
// its coordinator said it had ended it), recorder.coordinator-restarted (leases ended because
// the coordinator's node announced a restart: that earlier life can send nothing more),
// recorder.forgotten (records forgotten),
// recorder.ended-query (transactions a recorder asked their coordinator about),
// recorder.refinalize (finalizations re-sent by a recorder), gc/passes, gc/versions-removed and
// gc/keys-removed (version garbage collection), ts.taken (timestamps handed out), ts.waited (of those, the
// ones a transaction waited for: the batch was missing or used up) and ts.oracle-requests (K2
// Fig. 16: with batching, far fewer than timestamps). Durations, measured at the coordinator per operation (K2 Table 2):
// phase.get-ts (first request to timestamp), phase.read (minus its PUSHWS waits), phase.pushws
// (the wait of a read that pushed, measured at the data node), phase.write (Table 2's write
// phase, once per read-write transaction: with write pipelining, from the commit request until
// every write is durable; without, the sum of its writes' latencies), op.write (one write,
// request to acknowledgement), phase.commit (commit wait and durability excluded: COMMIT sent to
// decision, including synchronous finalization when on), commit-wait (time actually spent
// waiting at commit; ≤ 1 µs when the transaction outlasted its CWT). Per committed read-write
// transaction: txn.get-ts, txn.read and txn.pushws (summed over its operations), txn.write (its
// writes' round trips plus, with pipelining, the wait for their flush at commit), and, when the
// client labelled the transaction (wire.ClientRequest.Label), txn.<phase>/<label> for all five
// phases — the form of Table 2, one row per label.
package k2
