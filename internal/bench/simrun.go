package bench

import (
	"cmp"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/meridiandb/meridian/client"
	"github.com/meridiandb/meridian/internal/history"
	"github.com/meridiandb/meridian/internal/protocol"
	"github.com/meridiandb/meridian/internal/sim"
	"github.com/meridiandb/meridian/internal/topo"
	"github.com/meridiandb/meridian/internal/wire"
	"github.com/meridiandb/meridian/internal/workload"
)

// Spec is what to run, independent of the runtime.
type Spec struct {
	Workload         workload.Workload
	ClientsPerRegion int
	Warmup           time.Duration
	Duration         time.Duration
	Record           bool // keep a history of checkable transactions
	SkipVerify       bool // do not run the workload's post-run verification (TPC-C's conditions, YCSB-T's counters)
	// OneOpAtATime makes clients send the operations of GetMany, PutMany and Batch one at a
	// time instead of as one batch, for comparison.
	OneOpAtATime bool
	// Progress, if set, is called now and then with the fraction of the run done.
	Progress func(done float64)
	// AtWindowEnd, if set, is called once when the measured window ends, while every node's
	// state is still live (a heap profile taken after SimRun returns would miss it).
	AtWindowEnd func()
	// Faults, if set, is called once the load is done and the window is known, before any
	// client starts: it scripts crashes, restarts, clock skew or partitions with s.At.
	Faults func(s *sim.Sim, w Window)
	// Crashes are outages of data nodes, timed from the clients' start (see CheckCrashes). Unlike
	// Faults they are data, so a result can say what it ran under.
	Crashes []Crash
	// Network are loss, duplication and partitions between nodes (see NetFaults), data too.
	Network NetFaults
	// ClockSkews move servers' clocks, timed from the clients' start (see ClockSkew).
	ClockSkews []ClockSkew
}

// Validate rejects specs that cannot run.
func (s Spec) Validate() error {
	switch {
	case s.Workload == nil:
		return errors.New("bench: no workload")
	case s.ClientsPerRegion <= 0 || s.ClientsPerRegion > 100000:
		return fmt.Errorf("bench: clients per region must be 1..100000, got %d", s.ClientsPerRegion)
	case s.Duration <= 0:
		return fmt.Errorf("bench: duration must be positive, got %v", s.Duration)
	case s.Warmup < 0:
		return fmt.Errorf("bench: warm-up must not be negative, got %v", s.Warmup)
	}
	return nil
}

// notDrained is a Verifier workload's consistency when clients were still running at the end
// of the drain: a database they still write to cannot be checked, its check passing or failing
// on a state no finished run leaves.
const notDrained = "not checked: some clients were still running when the drain period ended"

// Verifier is implemented by workloads that can check the database after a run (TPC-C's
// consistency conditions; YCSB-T's read-modify-write counters).
type Verifier interface {
	Check(db *client.DB) error
}

// SometimesVerifier is implemented by Verifier workloads whose check applies to some of their
// configurations only: Verifies reports whether this one's does (YCSB-T: with read-modify-writes,
// not with blind writes). A run whose workload's check does not apply reports no consistency.
type SometimesVerifier interface {
	Verifies() bool
}

// verifierOf returns w's post-run check, if it has one that applies.
func verifierOf(w workload.Workload) (Verifier, bool) {
	v, ok := w.(Verifier)
	if sv, some := w.(SometimesVerifier); ok && some && !sv.Verifies() {
		return nil, false
	}
	return v, ok
}

// FreshChecker is implemented by workloads whose load must start from an empty database (a
// real cluster keeps what earlier runs wrote): after loading, CheckFresh fails if an earlier
// run's data is still there.
type FreshChecker interface {
	CheckFresh(db *client.DB) error
}

// RowLister is implemented by workloads that can enumerate their initial database; the driver
// then loads it with parallel loaders in each row's home region.
type RowLister interface {
	Rows(emit func(key string, value []byte) error) error
}

// clientStream tags the PCG streams of workload clients so they never coincide with a node's.
const clientStream = 0x636c69656e74 << 16

const (
	loadersPerRegion = 8
	loadBatchRows    = 100
)

type row struct {
	k string
	v []byte
}

func rowsByRegion(tp *topo.Topology, rl RowLister) ([][]row, error) {
	out := make([][]row, len(tp.Regions))
	err := rl.Rows(func(k string, v []byte) error {
		r := tp.HomeOf(k)
		out[r] = append(out[r], row{k, v})
		return nil
	})
	return out, err
}

// everyNth returns the batches of rows (loadBatchRows each) numbered i mod n.
func everyNth(rows []row, i, n int) []row {
	var out []row
	for b := i * loadBatchRows; b < len(rows); b += n * loadBatchRows {
		end := b + loadBatchRows
		if end > len(rows) {
			end = len(rows)
		}
		out = append(out, rows[b:end]...)
	}
	return out
}

// Result is one run's report. The JSON shape is shared by `meridian sim` and `meridian bench`.
type Result struct {
	Protocol string `json:"protocol"`
	Workload string `json:"workload"`
	Topology string `json:"topology"`
	Seed     uint64 `json:"seed"`
	Clients  int    `json:"clients"`

	// Namespace is the one a run against a cluster kept its list-append or register keys
	// under (meridian kv exec --namespace reads them back).
	Namespace string `json:"namespace,omitempty"`
	// Crashes is the outage schedule the run was given, by time.
	Crashes []CrashRecord `json:"crashes,omitempty"`
	// Network is the network faults the run was given, partitions by time.
	Network *NetFaultsRecord `json:"network_faults,omitempty"`
	// ClockSkews are the clock faults the run was given, by time.
	ClockSkews []ClockSkewRecord `json:"clock_skews,omitempty"`
	// UnreachableAtEnd names the data nodes that some client of a run against a cluster still
	// found unreachable when the window ended: the cluster, or part of it, had stopped answering.
	UnreachableAtEnd []string `json:"unreachable_at_end,omitempty"`

	VirtualSeconds float64 `json:"virtual_seconds,omitempty"`
	WallSeconds    float64 `json:"wall_seconds"`
	Events         uint64  `json:"events,omitempty"`
	// WindowMessages counts the messages sent in the measured window (load and drain excluded):
	// with WindowFlushes, the work a protocol does per transaction, whatever the CPU model.
	WindowMessages uint64  `json:"window_messages,omitempty"`
	WindowFlushes  uint64  `json:"window_flushes,omitempty"`
	EventsPerSec   float64 `json:"events_per_wall_second,omitempty"`
	TraceDigest    string  `json:"trace_digest,omitempty"`
	LoadSeconds    float64 `json:"load_seconds"`
	Summary
	ProtocolMetrics *protocol.Snapshot `json:"protocol_metrics,omitempty"` // merged node metrics of the window
	// NodeCounters (real clusters) sums the protocol counters the nodes serve at their
	// metrics_addr, from before the warm-up to after the final read; NodeCountersNote says
	// which nodes it misses, or counts only since a restart.
	NodeCounters     map[string]int64 `json:"node_counters,omitempty"`
	NodeCountersNote string           `json:"node_counters_note,omitempty"`
	Consistency      string           `json:"consistency,omitempty"` // workload's own post-run verification
	Durability       *Durability      `json:"durability,omitempty"`  // a checked workload's final read of its keys
	Check            any              `json:"check,omitempty"`       // checker report, filled by the caller

	History []history.Op `json:"-"`
}

// SimRun runs spec in a fresh simulation built from cfg.
func SimRun(cfg sim.Config, spec Spec) (*Result, error) {
	if err := spec.Validate(); err != nil {
		return nil, err
	}
	wallStart := time.Now()
	// Only a restart reads what nodes persisted; a run that schedules none need not keep it.
	// Faults may crash and restart nodes, so a run with them keeps it.
	if len(spec.Crashes) == 0 && spec.Faults == nil {
		cfg.DiscardPersisted = true
	}
	s, err := sim.New(cfg)
	if err != nil {
		return nil, err
	}
	defer s.Stop()
	tp := s.Topology()
	if err := CheckCrashes(tp, spec.Crashes, spec.Warmup+spec.Duration); err != nil {
		return nil, err
	}
	if err := CheckNetFaults(tp, spec.Network, spec.Warmup+spec.Duration); err != nil {
		return nil, err
	}
	if err := CheckClockSkews(tp, spec.ClockSkews, spec.Warmup+spec.Duration); err != nil {
		return nil, err
	}
	m := NewMetrics()
	rec := newRecorder(spec, cfg.Protocol)
	if rec != nil {
		rec.DeclareTrueTime() // clients read the simulator's true time
	}
	res := &Result{Protocol: cfg.Protocol.Name(), Workload: spec.Workload.Name(), Topology: tp.Name, Seed: cfg.Seed,
		Clients: spec.ClientsPerRegion * len(tp.Regions)}
	for _, c := range sortedCrashes(spec.Crashes) {
		res.Crashes = append(res.Crashes, c.record(tp))
	}
	res.Network = spec.Network.record(tp)
	for _, k := range sortedClockSkews(spec.ClockSkews) {
		res.ClockSkews = append(res.ClockSkews, k.record(tp))
	}

	var (
		windowMetrics *protocol.Metrics
		atMeasure     sim.Stats
		atEnd         sim.Stats
		window        Window
		loaded        bool
		loadErr       error
		reloadErr     error         // a restarted node's preloaded rows could not be reinstalled
		restartErr    error         // a scheduled crash's node could not be restarted
		skewUnread    func() []bool // after the run: which clock skews went unread
		running       int
	)
	startClients := func(now int64) {
		window = Window{Start: now, MeasureFrom: now + int64(spec.Warmup), End: now + int64(spec.Warmup+spec.Duration)}
		res.LoadSeconds = float64(now) / 1e9
		s.At(window.MeasureFrom, func() { resetNodeMetrics(s); atMeasure = s.Stats() })
		// Node metrics are read when the window closes, before the drain and the workload's
		// verification add work that is not part of the measurement.
		lost := protocol.NewMetrics() // counted by lives that crashed in the window
		s.At(window.End, func() {
			if windowMetrics = mergeNodeMetrics(s); windowMetrics != nil {
				windowMetrics.Merge(lost)
			}
			atEnd = s.Stats()
		})
		scheduleCrashes(s, tp, spec.Crashes, window, lost, &restartErr)
		scheduleNetFaults(s, spec.Network, window)
		skewUnread = scheduleClockSkews(s, spec.ClockSkews, window)
		if spec.Faults != nil {
			spec.Faults(s, window)
		}
		process := 0
		for r := range tp.Regions {
			region := topo.RegionID(r)
			coords := tp.DataNodes(region)
			for i := 0; i < spec.ClientsPerRegion; i++ {
				process++
				p := process
				// Clients draw from their own streams, disjoint from the nodes' (stream n+1).
				rng := rand.New(rand.NewPCG(cfg.Seed, clientStream|uint64(p)))
				gen := spec.Workload.NewClient(p, region, rng)
				coord := coords[i%len(coords)]
				if h, ok := gen.(workload.Homed); ok {
					if home := tp.PrimaryOf(h.Home()); tp.RegionOf(home) == region {
						coord = home
					}
				}
				// Stagger starts over 1 ms so clients do not move in lockstep.
				startAt := now + int64(rng.IntN(1000))*1000
				running++
				s.AddClient(region, coord, startAt, func(db *client.DB) {
					db.SetBatching(!spec.OneOpAtATime)
					ClientLoop(db, gen, p, r, window, m, rec)
					running--
				})
			}
		}
	}
	if rl, ok := spec.Workload.(RowLister); ok && canPreload(s) {
		if err := preload(s, rl, &reloadErr); err != nil {
			return nil, fmt.Errorf("preload: %w", err)
		}
		loaded = true
		startClients(0)
	} else if ok {
		// Load each region's rows through loaders in that region, so loading costs intra-region
		// round trips instead of one client's WAN round trips.
		loadersLeft := 0
		byRegion, err := rowsByRegion(tp, rl)
		if err != nil {
			return nil, err
		}
		for r, rows := range byRegion {
			coords := tp.DataNodes(topo.RegionID(r))
			for l := 0; l < loadersPerRegion && l < len(rows); l++ {
				mine := everyNth(rows, l, loadersPerRegion)
				loadersLeft++
				loader := s.AddClient(topo.RegionID(r), coords[l%len(coords)], 0, func(db *client.DB) {
					err := workload.LoadRows(db, func(emit func(string, []byte) error) error {
						for _, kv := range mine {
							if err := emit(kv.k, kv.v); err != nil {
								return err
							}
						}
						return nil
					}, loadBatchRows)
					if err != nil && loadErr == nil {
						loadErr = err
					}
					loadersLeft--
					if loadersLeft == 0 {
						loaded = true
						if loadErr == nil {
							startClients(db.Transport().Now())
						}
					}
				})
				// Loaders queue behind each other under one-at-a-time protocols: let them wait.
				loader.SetTimeout(24 * time.Hour)
			}
		}
		if loadersLeft == 0 {
			loaded = true
			startClients(0)
		}
	} else {
		loader := s.AddClient(0, tp.DataNodes(0)[0], 0, func(db *client.DB) {
			loadErr = spec.Workload.Load(db)
			loaded = true
			if loadErr == nil {
				startClients(db.Transport().Now())
			}
		})
		loader.SetTimeout(24 * time.Hour)
	}
	// Load, then run the window, then drain in-flight transactions (bounded).
	const step = 100 * time.Millisecond
	for !loaded {
		if s.Now() > int64(24*time.Hour) {
			return nil, errors.New("bench: load did not finish within 24 virtual hours")
		}
		s.RunFor(step)
	}
	if loadErr != nil {
		return nil, fmt.Errorf("load: %w", loadErr)
	}
	total := float64(window.End - window.Start)
	for s.Now() < window.End {
		s.RunFor(step)
		if spec.Progress != nil {
			spec.Progress(float64(s.Now()-window.Start) / total)
		}
	}
	if spec.AtWindowEnd != nil {
		spec.AtWindowEnd()
	}
	drainUntil := window.End + int64(30*time.Second)
	for running > 0 && s.Now() < drainUntil {
		s.RunFor(step)
	}
	if err := s.DiskError(); err != nil {
		return nil, err // a real node stops there too: nothing after it is the protocol's doing
	}
	if reloadErr != nil {
		return nil, reloadErr
	}
	if restartErr != nil {
		return nil, restartErr
	}
	if _, ok := verifierOf(spec.Workload); ok && !spec.SkipVerify && running > 0 {
		res.Consistency = notDrained
	}
	if fr, ok := spec.Workload.(FinalReader); ok && rec != nil && !spec.SkipVerify {
		res.Durability = &Durability{NotRun: notDrainedFinal}
		if running == 0 {
			var d *Durability
			s.AddClient(0, tp.DataNodes(0)[0], s.Now(), func(db *client.DB) {
				db.SetBatching(!spec.OneOpAtATime)
				d = finalCheck(db, fr, rec, s.Now()+int64(30*time.Second))
			})
			for d == nil && s.Now() < drainUntil+int64(time.Hour) {
				s.RunFor(step)
			}
			res.Durability = cmp.Or(d, &Durability{NotRun: "the final read did not finish"})
		}
	}
	if v, ok := verifierOf(spec.Workload); ok && !spec.SkipVerify && running == 0 {
		done := false
		var verr error
		s.AddClient(0, tp.DataNodes(0)[0], s.Now(), func(db *client.DB) {
			verr = v.Check(db)
			done = true
		})
		for !done && s.Now() < drainUntil+int64(72*time.Hour) {
			s.RunFor(step)
		}
		switch {
		case !done:
			res.Consistency = "verification did not finish"
		case verr != nil:
			res.Consistency = verr.Error()
		default:
			res.Consistency = "ok"
		}
	}
	res.Summary = m.Summarize(window.Seconds())
	if nm := windowMetrics; nm != nil {
		snap := nm.Snapshot()
		res.ProtocolMetrics = &snap
	}
	res.VirtualSeconds = float64(s.Now()) / 1e9
	res.WallSeconds = time.Since(wallStart).Seconds()
	res.Events = s.Stats().Events
	res.WindowMessages = atEnd.Messages - atMeasure.Messages
	res.WindowFlushes = atEnd.Flushes - atMeasure.Flushes
	if res.WallSeconds > 0 {
		res.EventsPerSec = float64(res.Events) / res.WallSeconds
	}
	res.TraceDigest = fmt.Sprintf("%016x", s.Digest())
	if skewUnread != nil {
		for i, unread := range skewUnread() {
			res.ClockSkews[i].Unread = unread
		}
	}
	if rec != nil {
		noteKeyRegions(rec, spec)
		res.History = rec.Ops()
	}
	return res, nil
}

func resetNodeMetrics(s *sim.Sim) {
	for _, n := range s.Topology().Nodes {
		if ms, ok := s.Handler(n.ID).(protocol.MetricsSource); ok {
			ms.Metrics().Reset()
		}
	}
}

func mergeNodeMetrics(s *sim.Sim) *protocol.Metrics {
	var out *protocol.Metrics
	for _, n := range s.Topology().Nodes {
		if ms, ok := s.Handler(n.ID).(protocol.MetricsSource); ok {
			if out == nil {
				out = protocol.NewMetrics()
			}
			out.Merge(ms.Metrics())
		}
	}
	return out
}

// canPreload reports whether every data node can install rows directly.
func canPreload(s *sim.Sim) bool {
	tp := s.Topology()
	for _, n := range tp.Nodes {
		if n.Roles&topo.RoleData == 0 {
			continue
		}
		if _, ok := s.Handler(n.ID).(protocol.Preloader); !ok {
			return false
		}
	}
	return true
}

// preload hands each data node the rows of the shards it holds a replica of.
func preload(s *sim.Sim, rl RowLister, reloadErr *error) error {
	if err := preloadNodes(s, rl, func(topo.NodeID) bool { return true }); err != nil {
		return err
	}
	// Preloaded rows are each node's initial image: a node that restarts gets them back. They are
	// generated again rather than kept: a copy of every row for the whole run was 11% of a
	// 50-warehouse TPC-C run's heap, and restarts are rare. A restart happens inside the
	// simulation, where nothing can return an error: the first failure fails the run after it.
	s.OnRestart(func(id topo.NodeID) {
		if err := preloadNodes(s, rl, func(n topo.NodeID) bool { return n == id }); err != nil && *reloadErr == nil {
			*reloadErr = fmt.Errorf("node %d restarted but its preloaded rows could not be reinstalled: %w", id, err)
		}
	})
	return nil
}

// preloadNodes streams rl's rows to the replicas chosen by want, a chunk at a time, so the rows
// never exist twice in memory.
func preloadNodes(s *sim.Sim, rl RowLister, want func(topo.NodeID) bool) error {
	const chunk = 8192
	tp := s.Topology()
	pending := make([][]wire.KV, len(tp.Nodes))
	flush := func(id int) error {
		if len(pending[id]) == 0 {
			return nil
		}
		if err := s.Handler(topo.NodeID(id)).(protocol.Preloader).Preload(pending[id]); err != nil {
			return fmt.Errorf("node %d: %w", id, err)
		}
		clear(pending[id])
		pending[id] = pending[id][:0]
		return nil
	}
	err := rl.Rows(func(k string, v []byte) error {
		for _, n := range tp.Shards[tp.ShardOf(k)].Replicas {
			if !want(n) {
				continue
			}
			pending[n] = append(pending[n], wire.KV{Key: k, Value: v})
			if len(pending[n]) == chunk {
				if err := flush(int(n)); err != nil {
					return err
				}
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	for id := range pending {
		if err := flush(id); err != nil {
			return err
		}
	}
	return nil
}
