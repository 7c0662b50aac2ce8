package main

import (
	"fmt"
	"slices"
	"strings"

	"github.com/meridiandb/meridian/internal/bench"
	"github.com/meridiandb/meridian/internal/check"
)

// resolveModel turns --check into a model name ("" for none).
func resolveModel(flag, promised string) (string, error) {
	switch flag {
	case "none", "":
		return "", nil
	case "auto":
		return promised, nil
	}
	if !slices.Contains(check.Models(), flag) {
		return "", fmt.Errorf("--check %q: want auto, none or one of %s", flag, strings.Join(check.Models(), ", "))
	}
	return flag, nil
}

// modelFor turns --check into the model wl's history is checked against ("" for none).
func modelFor(flag, promised string, wl interface{ Name() string }) (string, error) {
	model, err := resolveModel(flag, promised)
	if err != nil || model == "" || checkable(wl) {
		return model, err
	}
	if flag == "auto" {
		return "", nil // YCSB-T and TPC-C record no micro-ops; TPC-C verifies its own conditions
	}
	return "", fmt.Errorf("--check %s: the %s workload records no reads and writes a checker can judge (use --workload list-append or rw-register, or --check none)", flag, wl.Name())
}

// checkHistoryFlag refuses --history for a workload that records no history: the file was
// written empty, and checking it said "unknown".
func checkHistoryFlag(path string, wl interface{ Name() string }) error {
	if path == "" || checkable(wl) {
		return nil
	}
	return fmt.Errorf("--history: the %s workload records no reads and writes a checker can judge, so there is no history to write (use --workload list-append or rw-register)", wl.Name())
}

// attachCheck checks the run's history against model and stores the report in the result.
// A run whose workload records no checkable transactions gets the verdict "unknown".
func attachCheck(r *bench.Result, model string) error {
	rep, err := check.Check(r.History, model)
	if err != nil {
		return fmt.Errorf("check: %w", err)
	}
	r.Check = rep
	return nil
}

// checkVerdict returns the verdict stored by attachCheck, or "".
func checkVerdict(r *bench.Result) (model, verdict string, anomalies int) {
	rep, ok := r.Check.(*check.Report)
	if !ok || rep == nil {
		return "", "", 0
	}
	return rep.Model, rep.Verdict, len(rep.Anomalies) + rep.Omitted
}

// runExitStatuses ends the help of the commands that run a workload and check it.
const runExitStatuses = `Exit status: 0 when the run's history and the workload's own checks hold (or none was asked
for); 1 when the history is invalid or a workload's check failed or could not run; 2 when the
checker could not judge the history (nothing committed or read, or its search ran out), as
meridian check answers "unknown". Bad input and other errors exit 1 too. A run that ends prints
its result whatever its status.`

// failedConsistency is the error of a run whose printed result shows the consistency it was
// checked for not held or not established. Exit status 1: the checker judged its history
// invalid, or the workload's own verification (TPC-C's consistency conditions, YCSB-T's
// read-modify-write counters) failed, could
// not finish, or could not start because clients were still running when the drain ended.
// Exit status 2: the checker could not judge the history (nothing committed, nothing read, or
// a search ran out of its budget), as meridian check answers "unknown". A script running sim or
// bench learns it from the status, as it does from meridian check.
func failedConsistency(r *bench.Result) error {
	model, verdict, n := checkVerdict(r)
	if verdict == check.Invalid {
		return &exitError{code: 1, err: fmt.Errorf("the history is not %s: %s", model, counted(n, "anomaly", "anomalies"))}
	}
	if r.Consistency != "" && r.Consistency != "ok" {
		// It says what: a violation the workload's check found, or why the check could not
		// run (clients still running when the drain ended).
		return &exitError{code: 1, err: fmt.Errorf("consistency: %s", r.Consistency)}
	}
	if err := r.Durability.Err(); err != nil {
		return &exitError{code: 1, err: fmt.Errorf("durability: %w", err)}
	}
	if verdict == check.Unknown {
		why := "the checker could not decide"
		if rep, ok := r.Check.(*check.Report); ok && len(rep.Notes) > 0 {
			why = rep.Notes[len(rep.Notes)-1]
		}
		return &exitError{code: 2, err: fmt.Errorf("the history could not be judged %s: %s", model, why)}
	}
	return nil
}

// checkable reports whether a workload records micro-ops a checker can judge.
func checkable(w interface{ Name() string }) bool {
	return w.Name() == "list-append" || w.Name() == "rw-register"
}
