package client

import (
	"context"
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/meridiandb/meridian/internal/wire"
)

// Every type of an internal package that the exported API mentions has a name in this package
// (an alias): an application in another module can import no internal package, so it could not
// call Batch (wire.Op could not be built), write a Transport, or name PutMany's rows.
func TestExportedAPINamesNoInternalType(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	aliased := map[string]bool{} // "wire.KV" for each `type X = wire.KV`
	type mention struct{ where, what string }
	var mentions []mention
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		internal := map[string]bool{} // local names of internal imports
		for _, imp := range f.Imports {
			path, _ := strconv.Unquote(imp.Path.Value)
			if strings.Contains(path, "/internal/") {
				local := filepath.Base(path)
				if imp.Name != nil {
					local = imp.Name.Name
				}
				internal[local] = true
			}
		}
		collect := func(where string, n ast.Node) {
			ast.Inspect(n, func(n ast.Node) bool {
				if sel, ok := n.(*ast.SelectorExpr); ok {
					if x, ok := sel.X.(*ast.Ident); ok && internal[x.Name] && ast.IsExported(sel.Sel.Name) {
						mentions = append(mentions, mention{where, x.Name + "." + sel.Sel.Name})
					}
				}
				return true
			})
		}
		for _, d := range f.Decls {
			switch d := d.(type) {
			case *ast.FuncDecl:
				if !d.Name.IsExported() {
					continue
				}
				if d.Recv != nil {
					recv := d.Recv.List[0].Type
					if star, ok := recv.(*ast.StarExpr); ok {
						recv = star.X
					}
					if id, ok := recv.(*ast.Ident); !ok || !id.IsExported() {
						continue
					}
				}
				collect(fset.Position(d.Pos()).String(), d.Type)
			case *ast.GenDecl:
				for _, spec := range d.Specs {
					switch spec := spec.(type) {
					case *ast.TypeSpec:
						if !spec.Name.IsExported() {
							continue
						}
						if spec.Assign != 0 {
							if sel, ok := spec.Type.(*ast.SelectorExpr); ok {
								if x, ok := sel.X.(*ast.Ident); ok {
									aliased[x.Name+"."+sel.Sel.Name] = true
								}
							}
							continue
						}
						// Only the exported fields and methods of a type are API.
						ast.Inspect(spec.Type, func(n ast.Node) bool {
							if fld, ok := n.(*ast.Field); ok {
								exported := len(fld.Names) == 0
								for _, nm := range fld.Names {
									exported = exported || nm.IsExported()
								}
								if exported {
									collect(fset.Position(fld.Pos()).String(), fld.Type)
								}
								return false
							}
							return true
						})
					case *ast.ValueSpec:
						for _, nm := range spec.Names {
							if nm.IsExported() && spec.Type != nil {
								collect(fset.Position(spec.Pos()).String(), spec.Type)
							}
						}
					}
				}
			}
		}
	}
	if len(mentions) == 0 {
		t.Fatal("no exported declaration mentions an internal type: the check looks at nothing")
	}
	for _, m := range mentions {
		if !aliased[m.what] {
			t.Errorf("%s: the exported API uses %s, which has no name in package client", m.where, m.what)
		}
	}
}

// GetMany and PutMany split what one request may not carry into requests that each may, instead
// of sending every operation on its own: 1,025 reads took 72 s where 1,024 took 73 ms.
func TestBatchSplitsIntoRequests(t *testing.T) {
	big := make([]byte, MaxValueBytes)
	for _, c := range []struct {
		name string
		run  func(tx *Txn) error
		want []int // operations of each request sent (1 for a single get or put)
	}{
		{"1025 reads", func(tx *Txn) error { _, err := tx.GetMany(keys(1025)); return err }, []int{1024, 1}},
		{"2050 reads", func(tx *Txn) error { _, err := tx.GetMany(keys(2050)); return err }, []int{1024, 1024, 2}},
		{"five 1 MiB rows", func(tx *Txn) error {
			var rows []KV
			for _, k := range keys(5) {
				rows = append(rows, KV{Key: k, Value: big})
			}
			return tx.PutMany(rows)
		}, []int{3, 2}},
	} {
		f := &fakeTransport{data: map[string][]byte{}}
		if err := c.run(Open(f).Begin(TxnOptions{})); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		var got []int
		for _, r := range f.sent {
			n := 1
			if r.Op == wire.OpBatch {
				n = len(r.Batch)
			}
			got = append(got, n)
		}
		if fmt.Sprint(got) != fmt.Sprint(c.want) {
			t.Errorf("%s: requests of %v operations, want %v", c.name, got, c.want)
		}
	}
}

func keys(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("k%05d", i)
	}
	return out
}

// A transaction remembers how a request's answer ended it: a caller that ignored a Put's abort
// and committed was told "transaction already finished", not retryable; RunTxn whose fn
// committed the transaction itself reported that commit as a failure.
func TestEndedTransactionSaysHow(t *testing.T) {
	a := &endTransport{}
	db := Open(a)
	tx := db.Begin(TxnOptions{})
	_ = tx.Put("k", []byte("v")) // aborted; the caller does not look
	err := tx.Commit()
	if !IsRetryable(err) || AbortCause(err) != "read-watermark" {
		t.Errorf("commit after an ignored abort: %v, want the abort (retryable, read-watermark)", err)
	}
	if _, err := tx.Get("k"); !errors.Is(err, ErrTxnDone) || !IsRetryable(err) {
		t.Errorf("get after the abort: %v, want ErrTxnDone that says it aborted", err)
	}
	if a.commits != 0 {
		t.Errorf("%d commits sent for an aborted transaction", a.commits)
	}

	a.abortPuts = false
	err = RunTxn(db, TxnOptions{}, func(tx *Txn) error {
		if err := tx.Put("k", []byte("v")); err != nil {
			return err
		}
		return tx.Commit()
	})
	if err != nil || a.commits != 1 {
		t.Errorf("RunTxn whose fn commits: %v after %d commits, want nil after 1", err, a.commits)
	}
}

type endTransport struct {
	abortPuts bool
	commits   int
	started   bool
}

func (a *endTransport) RoundTrip(req *Request) (*Reply, error) {
	if !a.started {
		a.started, a.abortPuts = true, true
	}
	rep := &Reply{Txn: req.Txn, Seq: req.Seq, Code: wire.CodeOK}
	switch req.Op {
	case wire.OpPut:
		if a.abortPuts {
			rep.Code, rep.Cause = wire.CodeAborted, "read-watermark"
		}
	case wire.OpCommit:
		a.commits++
	}
	return rep, nil
}
func (*endTransport) Sleep(time.Duration) {}
func (*endTransport) Now() int64          { return 0 }

// A write refused for the transaction's size is told apart by ErrTxnTooLarge, which an
// application could only match by the text of an internal constant; an abort whose cause does
// not say what happened says it.
func TestRefusalsAnApplicationCanTellApart(t *testing.T) {
	tx := Open(codeTransport{code: wire.CodeBadArgument, err: wire.TxnWritesTooLarge}).Begin(TxnOptions{})
	err := tx.Put("k", []byte("v"))
	if !errors.Is(err, ErrTxnTooLarge) || !errors.Is(err, ErrBadArgument) {
		t.Errorf("a write over the transaction's bound: %v, want ErrTxnTooLarge and ErrBadArgument", err)
	}
	tx = Open(codeTransport{code: wire.CodeBadArgument, err: "empty key"}).Begin(TxnOptions{})
	if err := tx.Put("k", []byte("v")); errors.Is(err, ErrTxnTooLarge) {
		t.Errorf("another refusal taken for a size refusal: %v", err)
	}
	msg := (&AbortError{Cause: "unknown-transaction"}).Error()
	if !strings.Contains(msg, "idle timeout") {
		t.Errorf("unknown-transaction abort: %q, want it to name the idle timeout", msg)
	}
}

// A request the transport refused before sending it used no number and changed nothing: a
// commit refused so was reported as an unknown outcome, and an earlier refused request left the
// transaction able only to abort, as if lost in transit.
func TestTransportRefusalIsNotUnknown(t *testing.T) {
	tx := Open(&refuseOnce{op: OpCommit}).Begin(TxnOptions{})
	tx.seq = 1 // as after a put, so the commit is sent
	err := tx.Commit()
	var u *UnknownError
	if errors.As(err, &u) || !errors.Is(err, ErrBadArgument) {
		t.Errorf("commit the transport refused: %v, want ErrBadArgument and no unknown outcome", err)
	}
	tx = Open(&refuseOnce{op: OpPut}).Begin(TxnOptions{})
	if err := tx.Put("k", nil); !errors.Is(err, ErrBadArgument) || tx.lost != nil || tx.seq != 0 {
		t.Errorf("put the transport refused: %v, lost %v, seq %d; want ErrBadArgument, nothing lost, the number unused", err, tx.lost, tx.seq)
	}
}

// refuseOnce refuses the first request of the given op without sending it, then answers OK.
type refuseOnce struct {
	op   Op
	done bool
	sent []Op
}

func (r *refuseOnce) RoundTrip(req *Request) (*Reply, error) {
	if req.Op == r.op && !r.done {
		r.done = true
		return nil, fmt.Errorf("%w: refused before sending", ErrBadArgument)
	}
	r.sent = append(r.sent, req.Op)
	code := wire.CodeOK
	if req.Op == wire.OpAbort {
		code = wire.CodeAborted // the coordinator had already dropped it
	}
	return &Reply{Txn: req.Txn, Seq: req.Seq, Code: code, Cause: "unknown-transaction"}, nil
}
func (*refuseOnce) Sleep(time.Duration) {}
func (*refuseOnce) Now() int64          { return 0 }

// A Commit or Abort the transport refused without sending leaves the transaction open, so that
// it can still be ended (it was marked done, and the coordinator kept it until its idle
// timeout); and after the caller's Abort, Commit says ErrTxnDone even if the abort was answered
// "aborted" (it returned a retryable abort, and RunTxn re-ran a body that had aborted).
func TestCallerEndsTheTransaction(t *testing.T) {
	var tx *Txn
	for _, c := range []struct {
		op  Op
		end func(*Txn) error
	}{{OpCommit, (*Txn).Commit}, {OpAbort, (*Txn).Abort}} {
		r := &refuseOnce{op: c.op}
		tx = Open(r).Begin(TxnOptions{})
		if err := tx.Put("k", nil); err != nil {
			t.Fatal(err)
		}
		if err := c.end(tx); !errors.Is(err, ErrBadArgument) {
			t.Fatalf("refused %v: %v", c.op, err)
		}
		if err := c.end(tx); err != nil {
			t.Errorf("%v again after the refusal: %v, want it sent and answered", c.op, err)
		}
		if fmt.Sprint(r.sent) != fmt.Sprint([]Op{OpPut, c.op}) {
			t.Errorf("sent %v, want put and %v", r.sent, c.op)
		}
	}
	// tx is the aborted one.
	if err := tx.Commit(); err != ErrTxnDone {
		t.Errorf("commit after the caller's abort: %v, want ErrTxnDone", err)
	}
	runs := 0
	_ = RunTxn(Open(&refuseOnce{}), TxnOptions{}, func(tx *Txn) error {
		runs++
		_ = tx.Put("k", nil)
		return tx.Abort()
	})
	if runs != 1 {
		t.Errorf("RunTxn ran a body that aborted itself %d times, want once", runs)
	}
}

// ctxTransport answers every request at once but a commit, which it holds until the request's
// context is done.
type ctxTransport struct{ sent []Op }

func (c *ctxTransport) RoundTrip(req *Request) (*Reply, error) {
	return c.RoundTripContext(context.Background(), req)
}

func (c *ctxTransport) RoundTripContext(ctx context.Context, req *Request) (*Reply, error) {
	c.sent = append(c.sent, req.Op)
	if req.Op == wire.OpCommit {
		<-ctx.Done()
		return nil, fmt.Errorf("no reply: %w", ctx.Err())
	}
	return &Reply{Txn: req.Txn, Seq: req.Seq, Code: wire.CodeOK}, nil
}
func (*ctxTransport) Sleep(time.Duration) {}
func (*ctxTransport) Now() int64          { return 0 }

// A transaction bound to a context: once it is done nothing more is sent but an abort, a commit
// cut off is an unknown outcome that says why, and RunTxnContext makes no attempt.
func TestTransactionContext(t *testing.T) {
	c := &ctxTransport{}
	db := Open(c)
	ctx, cancel := context.WithCancel(context.Background())
	tx := db.BeginContext(ctx, TxnOptions{})
	if err := tx.Put("k", nil); err != nil {
		t.Fatal(err)
	}
	cancel()
	if err := tx.Put("j", nil); !errors.Is(err, context.Canceled) {
		t.Errorf("put after cancel: %v, want context.Canceled", err)
	}
	if err := tx.Abort(); err != nil {
		t.Errorf("abort after cancel: %v", err)
	}
	if fmt.Sprint(c.sent) != fmt.Sprint([]Op{OpPut, OpAbort}) {
		t.Errorf("sent %v, want the first put and the abort", c.sent)
	}

	ctx, cancel = context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	tx = db.BeginContext(ctx, TxnOptions{})
	_ = tx.Put("k", nil)
	err := tx.Commit()
	var u *UnknownError
	if !errors.As(err, &u) || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("commit cut off by its context: %v, want an unknown outcome wrapping the deadline", err)
	}

	ran := false
	err = RunTxnContext(ctx, db, TxnOptions{}, RetryPolicy{}, func(*Txn) error { ran = true; return nil })
	if ran || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("RunTxnContext with its context done: ran %v, %v; want no attempt and the deadline", ran, err)
	}
}

// A Commit that a done context stops before sending leaves the transaction open, and both a
// caller's Abort and RunTxnContext then send the abort (the coordinator held it, and its locks,
// to the idle timeout).
func TestCommitStoppedByContextAborts(t *testing.T) {
	c := &ctxTransport{}
	ctx, cancel := context.WithCancel(context.Background())
	tx := Open(c).BeginContext(ctx, TxnOptions{})
	_ = tx.Put("k", nil)
	cancel()
	if err := tx.Commit(); !errors.Is(err, context.Canceled) {
		t.Errorf("commit after cancel: %v, want context.Canceled", err)
	}
	_ = tx.Abort()
	c2 := &ctxTransport{}
	ctx2, cancel2 := context.WithCancel(context.Background())
	err := RunTxnContext(ctx2, Open(c2), TxnOptions{}, RetryPolicy{}, func(tx *Txn) error {
		err := tx.Put("k", nil)
		cancel2()
		return err
	})
	if !errors.Is(err, context.Canceled) {
		t.Errorf("RunTxnContext cancelled before its commit: %v", err)
	}
	for _, sent := range [][]Op{c.sent, c2.sent} {
		if fmt.Sprint(sent) != fmt.Sprint([]Op{OpPut, OpAbort}) {
			t.Errorf("sent %v, want the put and the abort", sent)
		}
	}
}
