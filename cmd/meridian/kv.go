package main

import (
	"bufio"
	"bytes"
	varint "encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"unicode"
	"unicode/utf8"

	"github.com/spf13/cobra"

	"github.com/meridiandb/meridian/client"
	"github.com/meridiandb/meridian/internal/history"
	mrt "github.com/meridiandb/meridian/internal/runtime"
	"github.com/meridiandb/meridian/internal/topo"
	"github.com/meridiandb/meridian/internal/workload/listappend"
)

type kvFlags struct {
	cf     clusterFlags
	region string
	node   string
}

// connect opens a client endpoint on the chosen coordinator: --node, or the first data node of
// --region (default: the first region).
func (f *kvFlags) connect(cmd *cobra.Command) (*mrt.Config, *client.DB, func(), error) {
	// Each flag names a coordinator; given both, one would be ignored without a word.
	if fs := cmd.Flags(); fs.Changed("node") && fs.Changed("region") {
		return nil, nil, nil, fmt.Errorf("--node %s and --region %s both choose the node to talk to: give one", f.node, f.region)
	}
	cfg, err := f.cf.load()
	if err != nil {
		return nil, nil, nil, err
	}
	var coord topo.NodeID
	switch {
	case cmd.Flags().Changed("region") && f.region == "":
		return nil, nil, nil, fmt.Errorf("--region is empty: give a region of %s", cfg.Source)
	case cmd.Flags().Changed("node") && f.node == "":
		return nil, nil, nil, fmt.Errorf("--node is empty: give a data node of %s", cfg.Source)
	case f.node != "":
		n, err := cfg.NodeByName(f.node)
		if err != nil {
			return nil, nil, nil, err
		}
		if n.Roles&topo.RoleData == 0 {
			return nil, nil, nil, fmt.Errorf("--node %s is not a data node; clients talk to data nodes", n.Name)
		}
		coord = n.ID
	case f.region != "":
		r, ok := cfg.Topology.RegionByName(f.region)
		if !ok {
			return nil, nil, nil, fmt.Errorf("--region %q: no such region in %s", f.region, cfg.Source)
		}
		coord = cfg.Coordinator(r, 0).ID
	default:
		coord = cfg.Coordinator(0, 0).ID
	}
	t, err := dialNode(cfg, coord)
	if err != nil {
		return nil, nil, nil, err
	}
	return cfg, client.Open(t), func() { _ = t.Close() }, nil
}

func newKVCmd() *cobra.Command {
	f := &kvFlags{}
	cmd := &cobra.Command{
		Use:   "kv",
		Short: "Read and write a running cluster: get, put, del, scan, and exec for scripted transactions",
		Long: "Read and write a running cluster: get, put, del, scan, and exec for scripted transactions.\n\n" +
			kvExitHelp,
	}
	f.cf.register(cmd.PersistentFlags(), false)
	cmd.PersistentFlags().StringVar(&f.region, "region", "", "talk to a data node of this region (default: the first region)")
	cmd.PersistentFlags().StringVar(&f.node, "node", "", "talk to this data node (name or id)")

	// withDB checks keys, then connects and runs run.
	withDB := func(cmd *cobra.Command, keys []string, run func(db *client.DB) error) error {
		for _, k := range keys {
			if err := checkKey(k); err != nil {
				return err
			}
		}
		_, db, closeFn, err := f.connect(cmd)
		if err != nil {
			return err
		}
		defer closeFn()
		return run(db)
	}
	var getFile string
	get := &cobra.Command{
		Use: "get KEY [--value-file FILE]", Short: "Print a key's value",
		Long: "Print a key's value, and a newline. With --value-file the value goes to FILE byte for byte, with\n" +
			"no newline ('-': standard output), as kv put --value-file took it: kv get photo --value-file got.jpg.\n" +
			"FILE is written only once the value is read, and replaced whole.\n\n" + kvExitHelp,
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return withDB(cmd, args, func(db *client.DB) error {
				v, err := kvGet(db, args[0])
				if err != nil {
					return err
				}
				switch {
				case !cmd.Flags().Changed("value-file"):
					fmt.Fprintln(cmd.OutOrStdout(), string(v))
				case getFile == "-":
					_, err = cmd.OutOrStdout().Write(v)
				default:
					err = writeValue(getFile, v)
				}
				return err
			})
		},
	}
	get.Flags().StringVar(&getFile, "value-file", "", "write the value to this file ('-': standard output), byte for byte, with no newline")
	cmd.AddCommand(get)
	var valueFile string
	put := &cobra.Command{
		Use:   "put KEY {VALUE | --value-file FILE}",
		Short: "Write a key",
		Long: "Write a key. With --value-file the value is FILE's contents, byte for byte, or with '-' standard\n" +
			"input's (a value too long for a command line, or binary: kv put photo --value-file - < photo.jpg).\n\n" + kvExitHelp,
		Args: func(cmd *cobra.Command, args []string) error {
			if cmd.Flags().Changed("value-file") {
				switch len(args) {
				case 0:
					return fmt.Errorf("usage: %s (no KEY given)", cmd.UseLine())
				case 1:
					return nil
				}
				return fmt.Errorf("usage: %s (give VALUE or --value-file, not both)", cmd.UseLine())
			}
			return exactArgs(2)(cmd, args)
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			var value []byte
			if len(args) == 2 {
				value = []byte(args[1])
			} else {
				v, err := readValue(cmd.InOrStdin(), valueFile)
				if err != nil {
					return err
				}
				value = v
			}
			return withDB(cmd, args[:1], func(db *client.DB) error {
				return kvTxn(db, false, func(tx *client.Txn) error { return tx.Put(args[0], value) })
			})
		},
	}
	put.Flags().StringVar(&valueFile, "value-file", "", "read the value from this file ('-': standard input) instead of the command line")
	cmd.AddCommand(put)
	cmd.AddCommand(&cobra.Command{
		Use: "del KEY", Short: "Delete a key", Long: "Delete a key (deleting an absent key is not an error).\n\n" + kvExitHelp, Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return withDB(cmd, args, func(db *client.DB) error {
				return kvTxn(db, false, func(tx *client.Txn) error { return tx.Delete(args[0]) })
			})
		},
	})
	var (
		limit  int
		prefix string
	)
	scan := &cobra.Command{
		Use:   "scan {START [END] | --prefix P}",
		Short: "Print the rows with START ≤ key < END (END omitted: to the end), or those whose key begins with P",
		Long: "Print the rows with START ≤ key < END (END omitted: to the end), or with --prefix those whose key begins with P.\n" +
			"A range within one routing prefix (the part of a key before its first '/') lives on one shard and is read\n" +
			"there alone; any other range is read from every shard's primary, at the cost of the farthest round trip.\n" +
			"A range that holds no key prints nothing and is no error. Each row is one line, key and value separated by\n" +
			"a tab; a key or value holding a tab, a line break, a leading quote or anything but printable UTF-8 is\n" +
			"printed as a quoted Go string (\"a\\tb\"), so that every row stays one line.\n\n" + kvExitHelp,
		Args: func(cmd *cobra.Command, args []string) error {
			if cmd.Flags().Changed("prefix") {
				if len(args) > 0 {
					return fmt.Errorf("usage: %s (give START [END] or --prefix, not both)", cmd.UseLine())
				}
				return nil
			}
			return rangeArgs(1, 2)(cmd, args)
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if limit < 0 {
				return fmt.Errorf("--limit must not be negative (0: no limit), got %d", limit)
			}
			var start, end string
			if cmd.Flags().Changed("prefix") {
				start, end = prefix, topo.PrefixEnd(prefix)
			} else {
				start = args[0]
				if len(args) == 2 {
					end = args[1]
				}
				// An empty range is more likely two keys given the wrong way round than a
				// question whose answer is nothing.
				if end != "" && end <= start {
					return fmt.Errorf("END %q is not after START %q: the range START ≤ key < END holds no key", end, start)
				}
			}
			var rows []kvRow
			err := withDB(cmd, []string{start, end}, func(db *client.DB) error {
				return kvTxn(db, true, func(tx *client.Txn) error {
					got, err := tx.Scan(start, end, limit)
					rows = rows[:0]
					for _, r := range got {
						rows = append(rows, kvRow{r.Key, string(r.Value)})
					}
					return err
				})
			})
			if err != nil {
				return err
			}
			for _, r := range rows {
				fmt.Fprintf(cmd.OutOrStdout(), "%s\t%s\n", scanField(r.k), scanField(r.v))
			}
			return nil
		},
	}
	scan.Flags().IntVar(&limit, "limit", 0, "at most this many rows (0: no limit)")
	scan.Flags().StringVar(&prefix, "prefix", "", "scan the keys that begin with this prefix instead of a range")
	cmd.AddCommand(scan)

	var register bool
	exec := &cobra.Command{
		Use:   "exec",
		Short: "Run one JSON transaction per stdin line and answer one JSON line each (Jepsen/Elle style)",
		Long: `Read one transaction per line on stdin, e.g. {"value":[["append",3,7],["r",4,null]]}, run it as
one transaction, and answer one line on stdout:
  {"type":"ok","value":[["append",3,7],["r",4,[1,7]]]}  committed, with the values read
  {"type":"fail","error":"…"}                          certainly not committed (also for bad lines)
  {"type":"info","error":"…"}                          outcome unknown
append adds an integer to the list at an integer key; r reads the whole list (null if absent).
With --register, micro-ops are ["w",k,v] and ["r",k,null] on single integers. List keys are
stored exactly as the list-append workload stores them, so exec and the workload see the same
lists. Registers have keys of their own: register k and list k are different keys.

Each transaction's outcome is in its answer, not in the exit status: 0 once stdin ends, whatever
the lines' answers were; 1 if exec could not start (bad flags or configuration, cluster
unreachable) or could not read stdin or write stdout.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := f.cf.load()
			if err != nil {
				return err
			}
			if err := checkNamespace(laNamespace, cfg.Topology); err != nil {
				return err
			}
			cfg, db, closeFn, err := f.connect(cmd)
			if err != nil {
				return err
			}
			defer closeFn()
			return kvExec(cmd.InOrStdin(), cmd.OutOrStdout(), db, cfg.Topology, register)
		},
	}
	exec.Flags().BoolVar(&register, "register", false, "read-write registers (w, r) instead of lists (append, r)")
	exec.Flags().StringVar(&laNamespace, "namespace", "", "work on the keys of this list-append namespace (as given to meridian bench --namespace)")
	cmd.AddCommand(exec)
	return cmd
}

type kvRow struct{ k, v string }

// The exit statuses of kv get, put, del and scan (kvExitHelp), so that a script can tell an
// absent key from a cluster it cannot reach, and a write that did not apply from one that may
// have: all exited 1.
const (
	kvExitError    = 1 // main's status for any error without an exitError
	kvExitNotFound = 2
	kvExitUnknown  = 3
)

const kvExitHelp = `Exit status of get, put, del and scan:
  0  done
  1  error: bad input, cluster unreachable, transaction aborted; a put or del did not apply
  2  not found: get of a key that has no value
  3  outcome unknown: the commit was sent but its outcome is not known, so a put or del may
     or may not have applied (read the key before writing it again); get and scan print nothing
exec answers each transaction on a line of its own; see meridian kv exec --help.`

// kvTxn runs fn as one transaction on db, retrying aborts, and gives its failure kv's exit
// status: a commit whose outcome is unknown is not a failed one.
func kvTxn(db *client.DB, readOnly bool, fn func(tx *client.Txn) error) error {
	err := client.RunTxn(db, client.TxnOptions{ReadOnly: readOnly}, fn)
	if code := kvExitCode(err); code > kvExitError {
		return &exitError{code: code, err: err}
	}
	return err
}

// kvExitCode is the exit status kv gives err, the error of a transaction (kvExitHelp). The
// client reports an answer lost before the commit as unavailable (the transaction is then
// aborted: nothing applied) and one lost at the commit as unknown.
func kvExitCode(err error) int {
	var u *client.UnknownError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &u):
		return kvExitUnknown
	case errors.Is(err, client.ErrNotFound):
		return kvExitNotFound
	}
	return kvExitError
}

// kvGet reads key in a transaction of its own. An absent key is an answer, not a failure: the
// transaction commits, so that "not found" is as certain as a value would be, and then exits 2.
func kvGet(db *client.DB, key string) ([]byte, error) {
	var (
		v     []byte
		found bool
	)
	err := kvTxn(db, true, func(tx *client.Txn) error {
		var err error
		v, err = tx.Get(key)
		found = err == nil
		if errors.Is(err, client.ErrNotFound) {
			return nil
		}
		return err
	})
	switch {
	case err != nil:
		return nil, err
	case !found:
		return nil, &exitError{code: kvExitNotFound, err: fmt.Errorf("%s: not found", key)}
	}
	return v, nil
}

// checkKey refuses a key the wire cannot carry: keys travel as strings, and a node drops a
// message holding one that is not UTF-8, so the client would wait out its timeout and report
// the node unavailable.
func checkKey(k string) error {
	if !utf8.ValidString(k) {
		return fmt.Errorf("key %q is not valid UTF-8", k)
	}
	return nil
}

// checkNamespace refuses a list-append namespace that would make every key of topology tp
// invalid: one that is not UTF-8 (checkKey), or so long that its keys pass the client's key
// limit, which failed every transaction of a run that then reported 0 txn/s and exited 0.
func checkNamespace(ns string, tp *topo.Topology) error {
	if !utf8.ValidString(ns) {
		return fmt.Errorf("--namespace %q is not valid UTF-8", ns)
	}
	// The longest key: the largest list-append key, on a shard whose id has the most digits.
	longest := len(listappend.StorageKey(tp, ns, math.MaxInt64, false)) + len(strconv.Itoa(len(tp.Shards)))
	if longest > client.MaxKeyBytes {
		return fmt.Errorf("--namespace is %d bytes long: keys under it would pass the %d-byte key limit; give a shorter one",
			len(ns), client.MaxKeyBytes)
	}
	return nil
}

func init() { rootCmd.AddCommand(newKVCmd()) }

// execAnswer is one line of kv exec's output.
type execAnswer struct {
	Type  string            `json:"type"`
	Value []history.MicroOp `json:"value,omitempty"`
	Error string            `json:"error,omitempty"`
}

// maxExecLineBytes bounds one input line.
const maxExecLineBytes = 1 << 20

// kvExec answers each transaction line of in with one line on out, and never stops on a bad line.
func kvExec(in io.Reader, out io.Writer, db *client.DB, tp *topo.Topology, register bool) error {
	r := bufio.NewReaderSize(in, 64<<10)
	enc := json.NewEncoder(out)
	for {
		line, tooLong, err := readLine(r, maxExecLineBytes)
		if tooLong || len(line) > 0 {
			ans := execAnswer{Type: "fail", Error: fmt.Sprintf("bad transaction: line longer than %d bytes", maxExecLineBytes)}
			if !tooLong {
				ans = execLine(line, db, tp, register)
			}
			if err := enc.Encode(ans); err != nil {
				return err
			}
		}
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return fmt.Errorf("stdin: %w", err)
		}
	}
}

// readLine reads one line, without its line ending. A line longer than max is read to its end
// but not kept, and reported as tooLong, so that one oversized line costs neither the memory
// nor the lines after it.
func readLine(r *bufio.Reader, max int) (line []byte, tooLong bool, err error) {
	for {
		chunk, err := r.ReadSlice('\n')
		if !tooLong {
			if len(line)+len(chunk) > max+2 { // room for "\r\n"
				tooLong, line = true, nil
			} else {
				line = append(line, chunk...)
			}
		}
		if err == bufio.ErrBufferFull {
			continue
		}
		line = bytes.TrimSuffix(bytes.TrimSuffix(line, []byte("\n")), []byte("\r"))
		if tooLong {
			line = nil
		}
		return line, tooLong, err
	}
}

func execLine(line []byte, db *client.DB, tp *topo.Topology, register bool) execAnswer {
	var req struct {
		Value []history.MicroOp `json:"value"`
	}
	if err := json.Unmarshal(line, &req); err != nil {
		return execAnswer{Type: "fail", Error: "bad transaction: " + err.Error()}
	}
	if len(req.Value) == 0 {
		return execAnswer{Type: "fail", Error: `bad transaction: want {"value":[[f,k,v],…]} with at least one micro-op`}
	}
	readOnly := true
	for _, op := range req.Value {
		switch {
		case op.Key < 0:
			return execAnswer{Type: "fail", Error: fmt.Sprintf("bad transaction: key %d is negative", op.Key)}
		case op.F == history.FRead:
		case !register && op.F == history.FAppend && op.Value.Kind == history.Int,
			register && op.F == history.FWrite && op.Value.Kind == history.Int:
			readOnly = false
		default:
			want := "append (with an integer) and r"
			if register {
				want = "w (with an integer) and r"
			}
			return execAnswer{Type: "fail", Error: fmt.Sprintf("bad transaction: micro-op %q on key %d: want %s", op.F, op.Key, want)}
		}
	}
	var result []history.MicroOp
	tx := db.Begin(client.TxnOptions{ReadOnly: readOnly})
	err := func() error {
		var err error
		if result, err = execTxn(tx, tp, req.Value, register); err != nil {
			return err
		}
		return tx.Commit()
	}()
	if err == nil {
		return execAnswer{Type: "ok", Value: result}
	}
	_ = tx.Abort()
	var u *client.UnknownError
	if errors.As(err, &u) {
		return execAnswer{Type: "info", Error: err.Error()}
	}
	// Any other error came before a commit was sent, or is a definite abort.
	return execAnswer{Type: "fail", Error: err.Error()}
}

// laNamespace is kv exec's --namespace: which list-append run's keys it works on.
var laNamespace string

// laKey is listappend's storage key for list k.
func laKey(tp *topo.Topology, k int64) string {
	return listappend.StorageKey(tp, laNamespace, k, false)
}

// registerKey is listappend's storage key for register k: on the same shard as list k, under
// another name (a register is one varint and the list [7] the same bytes as the register 7).
func registerKey(tp *topo.Topology, k int64) string {
	return listappend.StorageKey(tp, laNamespace, k, true)
}

// execTxn runs ops like the list-append workload's body: each key read at most once, writes
// buffered and applied at the end, later reads seeing earlier writes of the same transaction.
func execTxn(tx *client.Txn, tp *topo.Topology, ops []history.MicroOp, register bool) ([]history.MicroOp, error) {
	type state struct {
		exists bool
		list   []int64
		reg    int64
	}
	name := laKey
	if register {
		name = registerKey
	}
	keys := map[int64]*state{}
	var dirty []int64
	out := make([]history.MicroOp, len(ops))
	for i, op := range ops {
		st := keys[op.Key]
		if st == nil {
			st = &state{}
			v, err := tx.Get(name(tp, op.Key))
			switch {
			case errors.Is(err, client.ErrNotFound):
			case err != nil:
				return nil, err
			case register:
				x, n := varint.Varint(v)
				if n <= 0 || n != len(v) {
					return nil, fmt.Errorf("key %d holds %d bytes that are not a register", op.Key, len(v))
				}
				st.exists, st.reg = true, x
			default:
				l, err := listappend.DecodeList(v)
				if err != nil {
					return nil, fmt.Errorf("key %d: %w", op.Key, err)
				}
				st.exists, st.list = true, l
			}
			keys[op.Key] = st
		}
		out[i] = op
		switch op.F {
		case history.FRead:
			switch {
			case !st.exists:
				out[i].Value = history.Value{}
			case register:
				out[i].Value = history.IntValue(st.reg)
			default:
				out[i].Value = history.ListValue(append([]int64{}, st.list...))
			}
			continue
		case history.FAppend:
			st.list = append(st.list, op.Value.Int)
		case history.FWrite:
			st.reg = op.Value.Int
		}
		if !contains(dirty, op.Key) {
			dirty = append(dirty, op.Key)
		}
		st.exists = true
	}
	for _, k := range dirty {
		st := keys[k]
		v := listappend.EncodeList(st.list)
		if register {
			v = varint.AppendVarint(nil, st.reg)
		}
		if err := tx.Put(name(tp, k), v); err != nil {
			return nil, err
		}
	}
	return out, nil
}

func contains(s []int64, x int64) bool {
	for _, y := range s {
		if y == x {
			return true
		}
	}
	return false
}

// scanField is a key or value as kv scan prints it: as it is when that cannot break the
// one-row-per-line, tab-separated output, else quoted (strconv.Quote), which a reader tells
// apart by its leading quote.
func scanField(s string) string {
	if s != "" && s[0] == '"' {
		return strconv.Quote(s)
	}
	for _, r := range s {
		if r == '\t' || r == utf8.RuneError || !unicode.IsPrint(r) && r != ' ' {
			return strconv.Quote(s)
		}
	}
	return s
}

// writeValue writes a get's value to path through a temporary file beside it, renamed over path
// once complete, so that a failed write leaves whatever path held before.
func writeValue(path string, v []byte) error {
	if path == "" {
		return errors.New("--value-file: empty file name")
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return fmt.Errorf("--value-file: %w", err)
	}
	// CreateTemp makes the file 0600; give it the mode of the file it replaces, or a new
	// file's usual 0644 (umask 022), as a shell redirection would.
	mode := os.FileMode(0o644)
	if fi, err := os.Stat(path); err == nil {
		mode = fi.Mode().Perm()
	}
	werr := tmp.Chmod(mode)
	if werr == nil {
		_, werr = tmp.Write(v)
	}
	cerr := tmp.Close()
	if werr == nil {
		werr = cerr
	}
	if werr == nil {
		werr = os.Rename(tmp.Name(), path)
	}
	if werr != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("--value-file: %w", werr)
	}
	return nil
}

// readValue reads a put's value from path, or from stdin for "-", refusing one longer than a
// value may be before anything is sent.
func readValue(stdin io.Reader, path string) ([]byte, error) {
	what, in := "standard input", stdin
	if path != "-" {
		f, err := os.Open(path)
		if err != nil {
			return nil, fmt.Errorf("--value-file: %w", err)
		}
		defer f.Close()
		what, in = path, f
	}
	// One byte more than a value may hold tells a value that is too long from one that fits,
	// without reading an unbounded stream.
	v, err := io.ReadAll(io.LimitReader(in, client.MaxValueBytes+1))
	if err != nil {
		return nil, fmt.Errorf("reading the value from %s: %w", what, err)
	}
	if len(v) > client.MaxValueBytes {
		return nil, fmt.Errorf("the value in %s is longer than %d bytes", what, client.MaxValueBytes)
	}
	return v, nil
}
