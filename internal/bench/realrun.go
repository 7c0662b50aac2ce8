package bench

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"strings"
	"sync"
	"time"

	"github.com/meridiandb/meridian/client"
	"github.com/meridiandb/meridian/internal/history"
	"github.com/meridiandb/meridian/internal/protocol"
	"github.com/meridiandb/meridian/internal/topo"
	"github.com/meridiandb/meridian/internal/workload"
)

// RealConfig says how to reach a running cluster.
type RealConfig struct {
	Topology *topo.Topology
	Protocol string // for the report
	Seed     uint64 // seeds the clients' transaction generators
	// Dial opens one client endpoint on data node coord. RealRun closes what it returns if it
	// implements io.Closer.
	Dial func(coord topo.NodeID) (client.Transport, error)
	// Drain bounds how long RealRun waits for transactions in flight when the window ends
	// (default 30s).
	Drain time.Duration
}

// RealRun runs spec against a running cluster with real closed-loop clients: one goroutine and
// one connection per client, ClientsPerRegion of them in each region, each talking to a data
// node of its region (round-robin). The window is wall-clock time. Protocol metrics live in the
// servers and are not collected.
func RealRun(cfg RealConfig, spec Spec) (*Result, error) {
	if err := spec.Validate(); err != nil {
		return nil, err
	}
	if cfg.Topology == nil || cfg.Dial == nil {
		return nil, errors.New("bench: real run needs a topology and a dial function")
	}
	if cfg.Drain <= 0 {
		cfg.Drain = 30 * time.Second
	}
	tp := cfg.Topology
	wallStart := time.Now()
	m := NewMetrics()
	p, _ := protocol.Lookup(cfg.Protocol) // nil if unknown: the history then declares no order
	rec := newRecorder(spec, p)
	res := &Result{Protocol: cfg.Protocol, Workload: spec.Workload.Name(), Topology: tp.Name, Seed: cfg.Seed,
		Clients: spec.ClientsPerRegion * len(tp.Regions)}

	open := func(coord topo.NodeID) (*client.DB, func(), error) {
		t, err := cfg.Dial(coord)
		if err != nil {
			return nil, nil, err
		}
		closeFn := func() {
			if c, ok := t.(io.Closer); ok {
				_ = c.Close()
			}
		}
		return client.Open(t), closeFn, nil
	}
	if err := realLoad(tp, spec, open); err != nil {
		return nil, fmt.Errorf("load: %w", err)
	}
	if fc, ok := spec.Workload.(FreshChecker); ok {
		db, closeFn, err := openPatiently(tp.DataNodes(0)[0], open)
		if err != nil {
			return nil, err
		}
		err = fc.CheckFresh(db)
		closeFn()
		if err != nil {
			return nil, err
		}
	}
	res.LoadSeconds = time.Since(wallStart).Seconds()

	// Every client connects before any starts. The load reached the cluster, so a node that
	// refuses now is down for a moment (a crash review's kill) and is dialled again, as a
	// loader's is, until loadStall passes.
	type runner struct {
		db      *client.DB
		closeFn func()
		p, r    int
		coord   topo.NodeID
	}
	var runners []runner
	closeAll := func() {
		for _, c := range runners {
			c.closeFn()
		}
	}
	process := 0
	for r := range tp.Regions {
		coords := tp.DataNodes(topo.RegionID(r))
		for i := 0; i < spec.ClientsPerRegion; i++ {
			process++
			db, closeFn, err := openPatiently(coords[i%len(coords)], open)
			if err != nil {
				closeAll()
				return nil, fmt.Errorf("bench: client %d: %w", process, err)
			}
			runners = append(runners, runner{db: db, closeFn: closeFn, p: process, r: r, coord: coords[i%len(coords)]})
		}
	}
	defer closeAll()
	now := time.Now().UnixNano()
	window := Window{Start: now, MeasureFrom: now + int64(spec.Warmup), End: now + int64(spec.Warmup+spec.Duration)}
	var wg sync.WaitGroup
	unreachable := make([]bool, len(runners))
	for i, c := range runners {
		rng := rand.New(rand.NewPCG(cfg.Seed, uint64(c.p)))
		gen := spec.Workload.NewClient(c.p, topo.RegionID(c.r), rng)
		wg.Add(1)
		go func() {
			defer wg.Done()
			c.db.SetBatching(!spec.OneOpAtATime)
			unreachable[i] = ClientLoop(c.db, gen, c.p, c.r, window, m, rec)
		}()
	}
	finished := make(chan struct{})
	go func() { wg.Wait(); close(finished) }()
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	drainBy := time.Unix(0, window.End).Add(cfg.Drain)
	drained := false
wait:
	for {
		select {
		case <-finished:
			drained = true
			break wait
		case <-tick.C:
			if spec.Progress != nil {
				f := float64(time.Now().UnixNano()-window.Start) / float64(window.End-window.Start)
				spec.Progress(min(f, 1))
			}
			if time.Now().After(drainBy) {
				if _, ok := verifierOf(spec.Workload); ok {
					res.Consistency = notDrained
				}
				break wait
			}
		}
	}
	if drained {
		// Every client has returned, so their flags are final.
		res.UnreachableAtEnd = unreachableNodes(tp, unreachable, func(i int) topo.NodeID { return runners[i].coord }, cfg.Dial)
	}
	if fr, ok := spec.Workload.(FinalReader); ok && rec != nil {
		res.Durability = finalReadReal(tp, fr, drained, res.UnreachableAtEnd, spec, open, rec)
	}
	if v, ok := verifierOf(spec.Workload); ok && res.Consistency != notDrained {
		db, closeFn, err := openPatiently(tp.DataNodes(0)[0], open) // a review may still be striking it
		if err != nil {
			res.Consistency = err.Error()
		} else if err := v.Check(db); err != nil {
			res.Consistency = err.Error()
			closeFn()
		} else {
			res.Consistency = "ok"
			closeFn()
		}
	}
	res.Summary = m.Summarize(window.Seconds())
	res.WallSeconds = time.Since(wallStart).Seconds()
	if rec != nil {
		noteKeyRegions(rec, spec)
		res.History = rec.Ops()
	}
	return res, nil
}

// realLoad loads the initial database: a RowLister's rows through loadersPerRegion parallel
// clients in each row's home region (as SimRun does), any other workload through its Load.
func realLoad(tp *topo.Topology, spec Spec, open func(topo.NodeID) (*client.DB, func(), error)) error {
	rl, ok := spec.Workload.(RowLister)
	if !ok {
		db, closeFn, err := open(tp.DataNodes(0)[0])
		if err != nil {
			return err
		}
		defer closeFn()
		return spec.Workload.Load(db)
	}
	byRegion, err := rowsByRegion(tp, rl)
	if err != nil {
		return err
	}
	type loader struct {
		coord   topo.NodeID
		rows    []row
		db      *client.DB
		closeFn func()
	}
	var (
		loaders []loader
		reached bool  // some first connection was made
		dialErr error // the first first connection that failed
	)
	for r, rows := range byRegion {
		coords := tp.DataNodes(topo.RegionID(r))
		for l := 0; l < loadersPerRegion && l < len(rows); l++ {
			coord := coords[l%len(coords)]
			// The first connections are made here: a cluster that is not running (no node
			// answers) fails the load at once rather than after loadStall. A node that alone
			// refuses (down for a moment in a crash review) is dialled again by its loaders.
			db, closeFn, err := open(coord)
			if err != nil {
				dialErr = cmp.Or(dialErr, err)
			} else {
				reached = true
			}
			loaders = append(loaders, loader{coord: coord, rows: everyNth(rows, l, loadersPerRegion), db: db, closeFn: closeFn})
		}
	}
	if !reached && dialErr != nil {
		return dialErr
	}
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		loadErr error
	)
	for _, ld := range loaders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := loadThrough(ld.coord, ld.rows, ld.db, ld.closeFn, open); err != nil {
				mu.Lock()
				if loadErr == nil {
					loadErr = err
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return loadErr
}

// openPatiently is open, dialling coord again while it refuses, for up to loadStall.
func openPatiently(coord topo.NodeID, open func(topo.NodeID) (*client.DB, func(), error)) (*client.DB, func(), error) {
	backoff := minBackoff
	for start := time.Now(); ; {
		db, closeFn, err := open(coord)
		if err == nil || time.Since(start) > loadStall {
			return db, closeFn, err
		}
		time.Sleep(backoff)
		backoff = min(2*backoff, maxBackoff)
	}
}

// loadStall is how long a loader goes on retrying without loading a row: a node crashed or cut
// off by a review (cluster chaos) comes back within seconds, one that stays away fails the load.
const loadStall = time.Minute

// loadThrough loads rows through the data node coord (db, a first connection to it, which it
// closes; nil if that first dial failed), going on from the last batch that
// committed whenever the node cannot be reached or a batch fails, until loadStall passes
// without progress: a bench run beside a crash or partition review must get past its load. A
// batch whose outcome was unknown is written again, which in the load, with no other writer,
// leaves the same rows.
func loadThrough(coord topo.NodeID, rows []row, db *client.DB, closeFn func(), open func(topo.NodeID) (*client.DB, func(), error)) error {
	next := 0
	backoff := minBackoff
	var err error
	for stalled := time.Now(); ; {
		if db == nil {
			db, closeFn, err = open(coord)
		}
		if db != nil {
			rest := rows[next:]
			err = workload.LoadRows(db, func(emit func(string, []byte) error) error {
				for _, kv := range rest {
					if err := emit(kv.k, kv.v); err != nil {
						return err
					}
				}
				return nil
			}, loadBatchRows)
			closeFn()
			db = nil
			if err == nil {
				return nil
			}
			var le *workload.LoadError
			if !errors.As(err, &le) || errors.Is(err, client.ErrBadArgument) || errors.Is(err, client.ErrTxnTooLarge) {
				return err // not the cluster's absence: trying again would fail again
			}
			if le.Loaded > 0 {
				next += le.Loaded
				stalled, backoff = time.Now(), minBackoff
			}
			le.Loaded = next // so that its message counts rows from this loader's first
		}
		if time.Since(stalled) > loadStall {
			return fmt.Errorf("%w (no row loaded for %v)", err, loadStall)
		}
		time.Sleep(backoff)
		backoff = min(2*backoff, maxBackoff)
	}
}

// unreachableNodes names, in node order, the coordinators of the clients flagged in unreachable
// that still refuse a connection now: a client's last try may have come just before its node
// came back.
func unreachableNodes(tp *topo.Topology, unreachable []bool, coordOf func(int) topo.NodeID, dial func(topo.NodeID) (client.Transport, error)) []string {
	down := map[topo.NodeID]bool{}
	for i, u := range unreachable {
		if u {
			down[coordOf(i)] = true
		}
	}
	var names []string
	for _, n := range tp.Nodes {
		if !down[n.ID] {
			continue
		}
		t, err := dial(n.ID)
		if err == nil {
			if c, ok := t.(io.Closer); ok {
				_ = c.Close()
			}
			continue
		}
		names = append(names, NodeName(tp, n.ID))
	}
	return names
}

// finalReadReal runs a checked workload's final reads through the first data node once every
// client has finished and every node answers, and judges what they found.
func finalReadReal(tp *topo.Topology, fr FinalReader, drained bool, unreachable []string, spec Spec, open func(topo.NodeID) (*client.DB, func(), error), rec *history.Recorder) *Durability {
	switch {
	case !drained:
		return &Durability{NotRun: notDrainedFinal}
	case len(unreachable) > 0:
		// Its keys there would keep it retrying until its deadline, to say less than this.
		return &Durability{NotRun: strings.Join(unreachable, ", ") + " unreachable"}
	}
	db, closeFn, err := open(tp.DataNodes(0)[0])
	if err != nil {
		return &Durability{NotRun: "final read: " + err.Error()}
	}
	defer closeFn()
	db.SetBatching(!spec.OneOpAtATime)
	return finalCheck(db, fr, rec, time.Now().Add(30*time.Second).UnixNano())
}
