// Package runtime runs Meridian's sans-IO protocol handlers as real servers.
//
// A Server hosts one node of a cluster (Config, parsed from TOML): one goroutine runs the node's
// event loop, and every call into the protocol handler — messages, timer callbacks, persist
// completions — happens on it, one at a time, which is the contract of internal/node. The real
// node.Env reads the wall clock (Now), answers TrueTime as [now−ε, now+ε] with the configured
// ε, runs timers with time.AfterFunc posting back to the loop, and persists through the
// on-disk Pebble backend behind a group Committer whose completions are posted back to the
// loop as well. A persist error stops the node (fail-stop): its durability can no longer be
// promised.
//
// Transport. Nodes and clients talk over TCP in length-prefixed frames (internal/runtime/frame)
// carrying wire-encoded messages. Each node dials each peer lazily, one outbound connection per
// peer used for sending only, and receives on the connections peers dial to it. A writer
// goroutine per destination holds a FIFO delay queue: a message leaves after the emulated
// one-way latency between the two regions (topology.OneWay, times the configured scale), so a
// WAN can be emulated on loopback without netem. The last 2 ms of a delay are slept with
// nanosleep rather than a Go timer, which fires about a millisecond late (sleep_linux.go), so
// the sub-millisecond hops inside a region keep their length. A connection its reader saw
// closed is redialled before the next message is written (a failed dial backs off before the
// next try); frames a failed write did not write whole go once more on a fresh connection, and
// messages that find no connection are dropped (protocols tolerate loss). A link loses but never reorders: once a peer's new connection is
// accepted, frames still read from its older one are dropped, not delivered after newer ones. A
// frame that fails to decode is logged and dropped and the connection carries on; only a
// corrupt length prefix (the stream cannot be resynchronised) closes it. A client's request
// that fails to decode is answered instead, with a bad-argument error, when its ids can be
// read: it never reached the protocol, so the refusal is its whole outcome, and the client need
// not wait out its timeout. A gRPC request whose text fields are not UTF-8, which protobuf
// refuses, is decoded leniently (grpccodec.go) and refused by the coordinator's validation, so
// that it does not end the stream.
//
// Every connection opens with a Hello naming the cluster, the protocol and the settings the
// dialer runs or expects (Config.Setup: options, ε, latencies, layout). A node refuses a peer
// that differs in any, and a client that differs in what it gives, with an error naming both
// values: two configurations sharing a name would otherwise misread each other, and a client
// would judge the cluster's histories by another protocol's model.
//
// Clients connect to a data node of their region and get an endpoint id that names the node
// hosting the connection (frame.ClientID), so a protocol can answer a client from any node: the
// reply is sent to the hosting node, which relays it down the client's connection. The same
// endpoints serve gRPC streams (grpc.go) so that other languages can use the client API. A node
// numbers its connections by a sequence persisted in its store (endpoint.go), so the clients of
// its new life never get the ids of its last, which other nodes may still address.
//
// Oracle nodes (topo.RoleOracle) answer K2-TB's clock.TSBatchRequest with an
// internal/clock.OracleHandler over the wall clock and the configured ε, whatever protocol
// runs: a protocol's own oracle handler, if NewNode returns one, takes precedence.
package runtime
