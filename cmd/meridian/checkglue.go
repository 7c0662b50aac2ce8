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

// checkable reports whether a workload records micro-ops a checker can judge.
func checkable(w interface{ Name() string }) bool {
	return w.Name() == "list-append" || w.Name() == "rw-register"
}
