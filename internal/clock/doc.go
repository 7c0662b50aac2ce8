// Package clock holds every notion of time Meridian's protocols use, as deterministic, sans-IO
// logic: a physical clock model with offset and drift (what the simulator gives each node), the
// TrueTime interval and the TrueTime oracle of K2 (the "TTC Oracle"), K2-TB timestamp batching,
// hybrid logical clocks (CockroachDB, Wren), FaRMv2's interval clock synchronisation, and vector
// clocks (Walter, FW-KV). Nothing here reads the wall clock, starts a goroutine or sleeps: callers
// pass clock readings in and get timestamps, intervals and wait durations out.
//
// # Clock model
//
// A node's clock reads Physical.Read(t) = t + t·drift + offset at true time t. The rate
// convention matters at second order: a wait that must last at least x of true time is x·(1+D)
// on the local clock (LocalWait), while a validity window that must close before x of true time
// has passed is x·(1−D) on the local clock (LocalExpiry). Both add a nanosecond or two for the
// integer rounding of clock readings, so the bounds below are exact, not "up to rounding".
//
// # K2-TB and its proof obligations
//
// K2 (notes/k2.md §3.1–3.2) needs every transaction's timestamp to lie strictly inside its
// lifetime in true time: abs(start) < ts < abs(end) (Property 4.1). Batcher hands out timestamps
// from batches fetched from an Oracle; the proof rests on these obligations, each enforced in one
// place:
//
//  1. The oracle is honest: T_low ≤ abs(T_oracle) ≤ T_up with T_up − T_low = 2ε. Enforced by
//     Oracle.Now under the assumption that the oracle's clock is within ε of true time, which is
//     the simulator's job (RandomWithin draws such a clock; the clock-fault mode breaks it on
//     purpose). TrueTimeParams.Interval documents when an interval is honest.
//  2. The transaction takes its timestamp less than TTL of true time after the batch request was
//     SENT (abs(T_start) ≤ abs(T_take) < abs(T_send) + TTL ≤ T_up + TTL = base ≤ ts). Enforced by
//     Batcher.Take and Batcher.OnReply: the batch is usable only while local elapsed time since
//     StartRequest is below LocalExpiry(TTL, D) — counted from the send, and shortened by the
//     drift, never lengthened (the notes' recommended fix of the drift direction).
//  3. Every timestamp of a batch is below T_up + 2·TTL: TSCount = TTL/Step and ts_i = base + i·Step
//     with i < TSCount. Enforced by Batcher.Take.
//  4. The coordinator waits CWT = 2·(TTL+ε)·(1+D) on its local clock after taking the timestamp
//     and before the transaction ends, so ts ≤ T_up + 2·TTL ≤ abs(T_oracle) + 2ε + 2·TTL ≤
//     abs(T_take) + CWT_true < abs(end). Batcher.Take returns the wait; the caller (the K2
//     coordinator) must not reply to the client before it has elapsed on its own clock.
//  5. Timestamps are unique and, per coordinator, strictly increasing (K2-MVTO uses them as
//     transaction ids and version names). Origin = the coordinator id makes two coordinators'
//     timestamps distinct; a per-coordinator guard bumps Logical when a new batch overlaps an old
//     one. The guard never lowers Wall, and any Wall it reuses came from a batch that was valid
//     when it was taken, so obligations 2–4 still hold for the bumped timestamp. Enforced by
//     Batcher.Take.
//
// The strawman (BatcherConfig.Batching = false: one oracle request per timestamp, ts = T_up,
// CWT = 2ε·(1+D)) replaces obligation 2 with "the transaction began no later than the request was
// sent" (Take's txnStartLocal argument), and relies, as the paper's proof does, on a strictly
// positive one-way delay to the oracle.
//
// # Wire messages
//
// TSBatchRequest and TSBatchReply (Kinds 500 and 501) are the oracle protocol; OracleHandler
// answers them on an oracle node.
package clock
