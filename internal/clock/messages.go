package clock

import "github.com/meridiandb/meridian/internal/wire"

// TSBatchRequest asks a TrueTime oracle for its current interval (K2's GetTimestamp / TSBatch
// RPC). The requester turns the reply into a batch itself, so the request carries no size.
type TSBatchRequest struct {
	ReqID uint64 // echoed in the reply; matches it to the send time the requester recorded
}

// TSBatchReply carries the oracle's interval [Low, Up] at the moment it handled the request.
type TSBatchReply struct {
	ReqID    uint64
	Low      int64 // T_oracle^low, ns
	Up       int64 // T_oracle^up, ns
	OracleID uint32
}

func (*TSBatchRequest) Kind() wire.Kind { return 500 }
func (*TSBatchReply) Kind() wire.Kind   { return 501 }

func init() {
	wire.Register(&TSBatchRequest{})
	wire.Register(&TSBatchReply{})
}
