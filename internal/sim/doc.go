// Package sim is Meridian's deterministic discrete-event simulator.
//
// It runs every node, the network, the clocks, the disks and the clients of a deployment in one
// thread over virtual time. One seed gives one trace: the simulator folds every event it executes
// into a trace digest, and the same seed must print the same digest, byte for byte.
//
// The model (DESIGN.md §5):
//   - Time: virtual nanoseconds of true time. One event queue ordered by (time, sequence number),
//     so ties are broken by the order events were scheduled and the order is total.
//   - Network: one-way delay = RTT/2 between regions (IntraRTT/2 inside one), plus seeded uniform
//     jitter; FIFO per directed link unless reordering is on; loss, duplication, partitions (node
//     or region level) and slowdowns between regions can be switched on and off at any virtual
//     time. A duplicate is a
//     stray copy: it arrives up to a bound (100 ms by default) after its original, out of the
//     link's order. Loss and duplication may spare client connections, which real clients hold
//     over TCP (SetClientLinksReliable).
//   - Clocks: each node has a free-running local oscillator (offset and drift within bounds)
//     read by Env.Now, and a synchronized TrueTime source whose error stays within ε (a sawtooth
//     that drifts between periodic syncs) read by Env.TrueTime. Oracle nodes read their synced
//     source through Now, as TTC servers do. A clock fault adds skew beyond ε to chosen nodes, so
//     experiments can show what a protocol does when its clock assumption breaks.
//   - CPU: each node has Cores cores; every message, timer and persist completion costs
//     ServiceTime (plus whatever the handler Charges) and queues FIFO for a free core. A
//     handler's sends leave when its work ends. Without this model throughput has no ceiling.
//   - Disk: Env.Persist batches are group-committed: a flush takes FlushLatency and carries
//     every batch queued before it started; later batches wait for the next flush. With
//     ParallelFlushes (a storage service, as K2's shared storage) each batch is its own flush,
//     started at once.
//   - Faults: crash a node (it loses its CPU queue, timers and unflushed writes; its durable state
//     survives) and restart it (a fresh Handler rebuilt from durable state). A crash also resets
//     the connections of the node's clients, as a real server's death resets their TCP
//     connections: what they were waiting for fails at once, and they dial the node again, each
//     new connection a new endpoint as a real server's welcome makes it.
//   - Clients: ordinary blocking Go code (client.DB) run as coroutines (iter.Pull). Exactly one
//     runs at a time, resumed by the scheduler when its reply or wake-up event fires, so client code
//     is as deterministic as the nodes.
package sim
