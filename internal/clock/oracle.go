package clock

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/meridiandb/meridian/internal/node"
	"github.com/meridiandb/meridian/internal/wire"
)

// Oracle is K2's TrueTime oracle ("TTC Oracle") as pure logic: it turns a clock reading into the
// interval [local−ε, local+ε]. The interval contains true time only if the clock it is given is
// within Epsilon of true time (see TrueTimeParams.IntervalOf); that is a property of the oracle's
// hardware, which the simulator models with RandomWithin.
type Oracle struct {
	ID      uint32
	Epsilon time.Duration
}

// Now returns the oracle's interval when its clock reads local.
func (o Oracle) Now(local int64) (low, up int64) {
	return local - int64(o.Epsilon), local + int64(o.Epsilon)
}

// Answer builds the reply to req when the oracle's clock reads local.
func (o Oracle) Answer(local int64, req *TSBatchRequest) *TSBatchReply {
	low, up := o.Now(local)
	return &TSBatchReply{ReqID: req.ReqID, Low: low, Up: up, OracleID: o.ID}
}

// OracleHandler serves TSBatchRequests on an oracle node, reading env.Now() as the oracle's clock.
// The runtime must give oracle nodes a clock within Epsilon of true time: the simulator does so on
// purpose, a real deployment through its time hardware.
type OracleHandler struct {
	Env    node.Env
	Oracle Oracle

	Served     uint64 // requests answered
	Unexpected uint64 // messages of other kinds, dropped
}

// NewOracleHandler returns a handler answering with the given oracle identity.
func NewOracleHandler(env node.Env, o Oracle) *OracleHandler {
	return &OracleHandler{Env: env, Oracle: o}
}

// Handle answers a TSBatchRequest to its sender; anything else is counted and dropped, since an
// oracle has no other business and a stray message must not crash it.
func (h *OracleHandler) Handle(from node.ID, m wire.Msg) {
	req, ok := m.(*TSBatchRequest)
	if !ok || req == nil {
		h.Unexpected++
		slog.Debug("clock: oracle dropped unexpected message", "from", from, "type", fmt.Sprintf("%T", m))
		return
	}
	h.Served++
	h.Env.Send(from, h.Oracle.Answer(h.Env.Now(), req))
}
