// Package spanner is Meridian's Spanner-style baseline: K2's d2PL-TTC (notes/k2.md §4) and RLS's
// Spanner baseline (notes/rls.md §3.1) — distributed strict two-phase locking with a
// fine-grained lock table, two-phase commit, commit timestamps from TrueTime, optional commit
// wait, and lock-free snapshot read-only transactions.
//
// # Roles
//
// Every data node runs two halves that talk only through messages (even on one node), so that
// Spanner-RLS can reuse them separately (per-region transaction managers, IRT/CRT paths):
//
//   - Coordinator (coordinator.go): the transaction manager of the clients attached to the node.
//     A read goes to the key's primary, which takes a shared lock and returns the latest
//     committed value; a write is buffered (or, with write-locks=eager, sent to its
//     participant at once — see "Write locks"). A client's OpBatch (independent reads and
//     writes of distinct keys) sends each participant it touches one message with all of that
//     participant's operations, in the client's order (an OpsReq; a lone operation keeps its ReadReq or
//     WriteReq, and read-only transactions send one multi-key SnapReadReq), to every
//     participant at once: a batch costs one round trip per participant however many keys it
//     reads there. The participant takes the request's locks in order without a round trip
//     between them (a lock that must wait parks the request, holding the earlier keys' locks,
//     until granted; a refused one aborts the transaction and so releases them) and answers
//     once; it still admits one request of a transaction at a time, and each carries Seen, the
//     locks the coordinator saw granted there before (a request of n operations grants n).
//     Answers are matched by sending participant, and the batch is answered once, in request
//     order, or aborted as a whole by any refused operation. A scan goes to every participant
//     that may hold rows of its range (one, for a range within one routing prefix): in a
//     read-write transaction as a ScanReq, which takes shared range locks there on as much of
//     the range as its limit needs (scan.go), in a read-only one as a snapshot SnapReadReq,
//     which reads as much of it. At commit it
//     runs 2PC over every participant (read-only participants too: they confirm they still
//     hold the read locks), picks the commit timestamp, persists the decision in its txnrec
//     table, waits out commit wait, then sends the decision and answers the client.
//   - Participant (participant.go): owns the primaries' data (mvcc, single intent per key) and
//     the lock table (internal/storage/locks). Prepare takes exclusive locks in key order
//     (buffered writes; eager writes hold theirs already), writes intents at a prepare
//     timestamp, persists them and votes; the decision installs
//     the intents at the commit timestamp (persisted, then acknowledged) and releases every
//     lock of the transaction.
//
// # Timestamps and invariants
//
//   - prepare ts = max(TT.now().latest, maxTS+1) at the participant, where maxTS is every
//     timestamp the participant has used (prepares, applied commits, snapshot reads served).
//   - commit ts s ≥ TT.now().latest at the coordinator after all votes, > every prepare ts, >
//     every version the transaction read, > every timestamp the coordinator issued.
//   - With commit-wait=on the coordinator waits until TT.now().earliest > s before releasing any
//     lock or replying, so s lies inside the transaction's real-time interval: timestamp order
//     is a strict serialization (Spanner's external consistency).
//   - Because maxTS advances on every decision a participant applies (read-only participants
//     included), a transaction that locks a key after another released it gets a larger
//     timestamp even with commit wait off: conflict order and timestamp order agree, so with
//     commit-wait=off histories are still serializable (snapshot reads included) but not
//     strictly serializable.
//   - Read-only transactions read at s_read = TT.now().latest taken at their first request, at
//     the primaries, without locks. A snapshot read raises the participant's maxTS to s_read (so
//     nothing can later commit at or below it there) and waits while the key carries a prepared
//     intent at or below s_read — Spanner's safe time, per key: everything that can commit at or
//     below s_read is then installed. With commit wait on, a read-only transaction's commit
//     also waits until TT.now().earliest > s_read, so a transaction that starts after it ends
//     gets a larger timestamp.
//
// # Version garbage collection
//
// A participant keeps every version a snapshot read younger than gc-ttl (default 10 s) may need
// and collects the rest (txnkit.VersionGC over mvcc gc.go): a pass at local clock reading now
// raises the store's horizon to now−gc-ttl and keeps, per key, the newest committed version at or
// below it and everything newer. Passes are armed from the participant's persist path, which every
// applied decision goes through; gc/passes, gc/versions-removed and gc/keys-removed count them.
//
//   - Snapshot reads are the only reads at a timestamp. One below the horizon is refused
//     (SnapReadResp.Cause "too-old"; checked again when a read parked behind an intent resumes)
//     and the coordinator aborts the read-only transaction with that cause (aborts/too-old); the
//     client's retry takes a fresh snapshot. A read-only transaction has gc-ttl to finish.
//   - Locking reads need no check: they read the latest committed version, which GC never
//     removes. Writes need none either: they are intents (or pending eager writes) until the
//     decision, and GC never touches an intent.
//   - Commits: a prepare timestamp is at least TT.now().latest, so above the horizon (a local
//     clock reading minus gc-ttl); one that would fall below it (only a local clock more than
//     gc-ttl off TrueTime, or below a horizon recovered from disk) votes no with too-old, so no
//     intent is laid below the horizon. The horizon can still pass a prepared transaction
//     whose decision is late (its coordinator down for longer than gc-ttl), and the commit then
//     installs a version below the horizon (counted as gc/late-commits). It cannot be refused —
//     the decision is final — and changes no answer: the key holds no version newer than the
//     intent (exclusive lock, maxTS), a read at or above the horizon is above the prepare
//     timestamp and so waited for this decision, and the reads below the horizon are refused.
//   - The horizon is persisted ahead of the deletes it allows and restored by mvcc.Recover, so
//     a restarted participant keeps refusing what its earlier life could no longer answer.
//
// # Write locks: buffered (Spanner) or eager (K2's d2PL-TTC)
//
// write-locks=buffered (default) is Spanner: the coordinator buffers writes, answers the
// transaction's reads of them itself, and ships them with the prepare, which takes the exclusive
// locks. A write costs no round trip and its lock is held only from prepare to decision.
//
// write-locks=eager is the d2PL-TTC K2's paper compares against (notes/k2.md §4: it "blocks on
// all conflict types", and K2 also sends writes to participants during execution): each
// Put/Delete goes to the key's participant as a WriteReq when the client issues it. The
// participant takes the exclusive lock then, under the lock policy (upgrading the transaction's
// shared lock; a wound-wait/wait-die/no-wait abort reaches the client as an abort with that
// cause), keeps the value as the transaction's pending write — volatile, invisible to other
// transactions and to snapshot reads, returned to the transaction's own later reads there
// (read-your-writes; the coordinator keeps no copy) — and answers. Prepare then takes no lock:
// it turns the pending writes into intents at the prepare timestamp, persists them and votes;
// commit and abort are unchanged. Each eager write grants one more "lock" in the Seen count, so a
// participant that lost pending writes (restart, idle abort) votes no. Each write pays a round
// trip to its participant (the "write" distribution under protocol_metrics) and holds its lock
// for the rest of the transaction, which is what makes d2PL-TTC slower than K2 at low
// contention in the paper's Figs. 17–18.
//
// # Lock policies and the deadlock metric
//
// lock-policy picks NO_WAIT, WAIT_DIE, wound-wait (default, Spanner's), detect or timeout. The
// first three prevent deadlocks by aborting on some conflicts; detect blocks on every conflict
// and breaks the deadlocks that form with one global wait-for graph (deadlock.go: the youngest
// transaction of each cycle dies); timeout blocks on every conflict and aborts a transaction
// whose request has waited lock-timeout at a participant, deadlocked or not (notes/k2.md §4
// names it beside wound-wait; k2-fig18-timeout sweeps its length). K2's d2PL-TTC is described as blocking "on all conflict
// types" (K2 Fig. 7) with deadlocks that occur and are counted (Fig. 17d), which is detect.
// Reads take shared
// locks as they execute, scans shared range locks (which conflict with exclusive locks on keys
// in the range, existing or not, and each policy judges like any other conflict; the detector
// gets their waits as edges); writes take exclusive locks at prepare (buffered) or when issued
// (eager), so an RMW upgrades. Under wound-wait an older requester wounds younger conflicting transactions:
// a participant aborts a wounded transaction at once if it has not voted there yet, and always
// tells its coordinator, which aborts it unless it already decided to commit (a committed
// transaction waits for nothing, so the wounder's wait is short). This closes the cross-shard
// cycle where a prepared younger transaction waits elsewhere for the older one.
//
// Invariant: once a participant has voted yes — a read-only vote included — it never releases
// the transaction's locks before the decision (wound, idle timeout and lost-lock checks all leave
// it alone); it is "prepared" there. Its vote and the WoundReq race to the coordinator, and the
// vote was sent first, so the coordinator may commit on it: a read lock dropped at the wound
// would let the wounder overwrite what the committing transaction read, with the transaction's
// locks elsewhere possibly not yet acquired — a G2-item cycle (found by wound-wait/seed1/keys5
// after a change of client seeding; TestWoundAfterReadOnlyVote replays it).
//
// A transaction's age is the TrueTime (earliest) at the coordinator when the client's first
// attempt of the logical transaction began; the coordinator keeps an aborted transaction's age
// for its client endpoint and the retry (ClientRequest.Attempt > 0) takes it, so a retried
// transaction keeps its priority and old transactions are not starved. We chose this over a
// client-carried priority because the wire protocol already carries Attempt and a client always
// talks to one coordinator. An age is kept only from the abort to the client's next begin, and
// for an idle timeout at most (txnkit.RetryAges): no session end reaches the coordinator, and
// keeping one per endpoint ever seen grew without bound. A retry later than that, or after a
// coordinator restart, simply gets a fresh age.
//
// "deadlocks" under protocol_metrics counts transactions aborted by the lock policy — causes
// no-wait, wait-die, wound-wait, deadlock and lock-timeout, each victim once, counted at its
// coordinator (participants count lock-timeouts, each wait that timed out).
// Under detect each is a real deadlock broken (deadlocks-detected counts the cycles the
// detector found; a victim that had already committed is not aborted). The other policies
// never let a deadlock form, so each of their aborts is a deadlock avoided (or, for NO_WAIT, a
// conflict it refused to wait on); notes/k2.md §4 recommends counting each victim.
// idle-aborts counts transactions a participant aborted because their coordinator fell silent
// (a crash, or a wait nobody resolved); restart-aborts those it aborted because their
// coordinator announced a restart. Per-cause counts are under aborts/<cause>.
//
// # Faults
//
//   - Decisions follow presumed abort: only commits are recorded (before any participant hears
//     of them); a coordinator asked about a transaction it neither runs nor has a record of
//     answers "aborted". Records are forgotten once every participant acknowledged; a commit
//     decision not acknowledged a keep-alive period after it went is sent again
//     (decisions-resent), since a lost DecideReq or DecideAck kept the record for good.
//   - A participant polls the coordinator about a prepared transaction (read-only votes
//     included) after decision-timeout, and after a restart re-locks its recovered intents and
//     polls at once. The poll repeats the participant's yes vote and its wound of the
//     transaction, if any, either of which may have been lost: a lost vote left the transaction
//     preparing for good, and a lost wound of a prepared transaction a deadlock that only the
//     wound breaks (the wounder waits here for it, it waits elsewhere for the wounder).
//   - Lost messages cost a bounded delay, a keep-alive period or two, never a hang. Keep-alives
//     say what the coordinator still awaits from the participant (KeepAlive.Await): a request or
//     prepare the participant never got (it would have arrived first on the same link) is asked
//     for again (ResendReq; counted as lost-requests at the participant and requests-resent at
//     the coordinator, which also sends again a snapshot read a participant refused as not
//     held); an answer sent
//     longer than decision-timeout before is sent again (answers-resent; a younger one may
//     merely have crossed the keep-alive); a refusal or wound of a transaction the participant
//     aborted is repeated. A lost abort decision leaves an unprepared transaction at its
//     participant with no coordinator driving it: one silent for longer than a keep-alive
//     period and decision-timeout is asked about (silent-txns-asked; presumed abort answers
//     it), instead of holding its locks until the idle timeout. Under lock-policy=detect the
//     detector wounds again a victim still reported waiting a keep-alive period after its
//     wound went (deadlock-wounds-resent). Once a participant has asked for a request again,
//     messages are being lost: for an idle-timeout after the last such ask the coordinator
//     also chases, every 1.25 decision-timeouts, each transaction that has waited that long
//     for an answer or a vote (Coordinator.armChase), so a later loss costs about that rather
//     than a keep-alive period (under 15% loss, eager writes: 0 of 40 rw-register runs left
//     clients waiting at the drain's end, 6 before). Without faults none of these sends
//     anything, so traces are unchanged.
//   - A yes vote is durable before it is sent (Spanner logs every participant's prepare
//     record), read locks included: a record "s/rv/<txn>" lists the keys the participant holds
//     only read locks on (all of a read-only participant's; a writer's intents bring back its
//     exclusive locks), written with the intents, and a restarted participant takes those
//     locks back and polls the coordinator, so a crash between vote and decision cannot let a
//     writer commit over what a committing transaction read. A transaction's range locks go in
//     a record of their own, "s/rr/<txn>" (the ranges' bounds), in the same batch and taken
//     back the same way: nothing validates a scan at commit, so a range lock lost while its
//     transaction is prepared would let a writer commit a row into the range below the commit
//     timestamp the scanner is yet to get, a phantom (TestScanRangeLockSurvivesRestart). An
//     unprepared transaction's range locks are lost like its other locks, and its Seen no longer
//     matches. The records are deleted with the decision. They cost read-only participants one
//     flush. Every vote also records the
//     transaction's lock age ("s/pa/<txn>", in the same batch), and the locks taken back carry
//     it: taken back at age zero they were older than every transaction and never wounded, so
//     under wound-wait an older transaction could wait for a younger one that itself waited at
//     another participant, a deadlock nothing broke (a list-append fault run, seed 33, kept 46
//     of its 50 clients waiting until the drain gave up; TestRecoveredLocksKeepTheirAge).
//   - A participant aborts an unprepared transaction whose coordinator has been silent for
//     idle-timeout. A live coordinator sends each participant of its executing transactions a
//     KeepAlive every third of that, so a transaction that waits long for a lock (here or at
//     another participant) keeps its locks; only a dead coordinator's transactions idle out. A participant that does not know the
//     transaction of a KeepAlive (it restarted since) answers with a WoundReq of cause
//     participant-lost-locks if the coordinator saw it grant locks (KeepAlive.Seen), and
//     asks for the request again otherwise: the coordinator may be waiting for an answer the
//     crash swallowed, and would otherwise hold the transaction's other locks alive for good. Each request carries how many read locks the participant granted the
//     transaction before, so one that lost locks (restart, idle abort) votes no.
//   - A read-only transaction leaves no state at a participant, but its request waits for its
//     snapshot reads: the coordinator sends a KeepAlive (Snap, with the request's number) for
//     each one still unanswered, and a participant that does not hold it parked behind an
//     intent (it restarted since, or the read never arrived) refuses it with cause
//     participant-lost-read; the coordinator sends the read again.
//     Before, such a read left the client waiting until its own timeout with its coordinator
//     alive. A read answered just before its keep-alive arrived had its answer sent first on
//     the same link, so the refusal finds the read done and is ignored.
//   - A coordinator aborts a transaction whose client has sent nothing for idle-timeout. One
//     aborted while its client had no request in flight (wounded while the client thinks) is
//     kept for the client's next request to learn the cause, but only until that same timeout:
//     a client that never comes back must not leave an entry behind. A later request of a
//     transaction the coordinator does not hold is refused, cause unknown-transaction
//     (txnkit.AnswerUnheld), never begun afresh; so is a first request numbered at or below a
//     transaction of the same client that ended here, a late copy (clients number their
//     transactions increasingly), which would begin a transaction no client drives
//     (txnkit.EndedTxns; counted as late-first-request). A transaction decided to commit (a
//     read-only one in its commit wait included) stays under its client's name until its answer
//     goes, so that a late copy of the commit request is dropped as a duplicate: refused as
//     unknown, its refusal reached the client ahead of the OK (a committed transaction reported
//     aborted).
//   - A participant remembers each transaction whose decision it applied for an idle timeout
//     (decidedTxns; an abort of one it never saw included) and drops a request of it arriving
//     meanwhile, a copy the network delivered late (counted as late-copies): the decision
//     deleted the transaction, and the copy began it again, its locks or intents held until the
//     idle timeout with no coordinator driving them.
//   - Transaction ids embed a persisted incarnation number, so they never repeat after a restart.
//   - A restarted node tells every other data node (Restarted, carrying its new incarnation),
//     before it handles anything, and each settles at once what the crash lost rather than wait
//     for a timer. As a participant, a peer aborts every unprepared transaction an earlier life
//     of the restarted coordinator ran (its id's incarnation is below the new one): nothing will
//     ever prepare or end it, and its locks stalled every conflicting transaction for the idle
//     timeout (counted as restart-aborts). As a coordinator, it runs the keep-alive round for the
//     restarted participant at once, which refuses the transactions it lost as above. Sending
//     the lost requests again (crdb's answer) would not do: the locks an unprepared
//     transaction took there are gone, and a request that counts them is refused anyway; only
//     a transaction that held nothing there yet could have gone on. Three 300 ms crashes in a
//     list-append run (CLI defaults) cut commits from 786 to 188 before, to 443 with it; most
//     of the rest is the crashed gateways' own clients, which wait for answers their
//     coordinator's crash lost (TestRestartNoticeSettlesLostTransactions).
//
// # Deviations from the papers
//
//   - No Paxos: each shard has one primary that persists through env.Persist (the K2 setup:
//     "same distribution, replication, and storage layer"). Snapshot reads are served by the
//     primaries, not by replicas at safe time.
//   - Read-only participants vote in 2PC (after persisting the vote) so a lost read lock is
//     detected before commit, and then hold their read locks until the decision like prepared
//     writers; Spanner's
//     client drives 2PC itself instead of a coordinator TM.
//   - Scans (scan.go): a read-write scan locks, at each participant it goes to, the part of
//     its range up to the last row its limit needs (shared range locks, taken in steps and held
//     to the decision; Spanner locks key ranges too), and reads the latest committed rows there,
//     the transaction's own writes applied as its point reads see them; a read-only scan is a
//     lock-free snapshot scan that reads as far as its limit needs. A range lock blocks every
//     write into its range at every participant it was taken at, so
//     writers into a range that is scanned all the time starve under no-wait and mostly wait
//     out lock-timeout under timeout (TestScanNoPhantoms). TPC-C here uses point reads.
//     mutant=scan-no-range-lock lets a read-write scan take no range lock, mutant=scan-no-wait
//     lets a snapshot scan read past prepared intents (TestScanNoPhantoms catches both).
//
// # Options
//
//	lock-policy=no-wait|wait-die|wound-wait|detect|timeout   default wound-wait
//	lock-timeout=500ms                        with lock-policy=timeout: the longest lock wait
//	commit-wait=on|off                        default on (K2's runs used off)
//	write-locks=buffered|eager                default buffered (Spanner); eager is K2's d2PL-TTC
//	idle-timeout=5s                           abort silent unprepared transactions
//	decision-timeout=500ms                    prepared participants poll the coordinator
//	gc-ttl=10s                                keep superseded versions this long (10ms to 1000h);
//	                                          older snapshot reads abort with cause too-old
//	mutant=early-release                      reply and release at the decision, before it is
//	                                          durable and before commit wait: real-time order breaks
//	mutant=no-read-lock                       reads take no shared lock: G-single / G2
//	mutant=eager-no-lock                      (needs write-locks=eager) writes take no exclusive
//	                                          lock: lost updates / G0
//	mutant=scan-no-wait                       snapshot scans read past prepared intents: phantoms
//	mutant=scan-no-range-lock                 read-write scans take no range lock: phantoms
package spanner
