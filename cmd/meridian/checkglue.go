package main

import (
	"fmt"

	"github.com/meridiandb/meridian/internal/bench"
)

// checkSummary is what sim/bench JSON carries under "check".
type checkSummary struct {
	Model     string `json:"model"`
	Verdict   string `json:"verdict"`
	Anomalies []any  `json:"anomalies"`
}

// resolveModel turns --check into a model name ("" for none).
func resolveModel(flag, promised string) (string, error) {
	switch flag {
	case "none", "":
		return "", nil
	case "auto":
		return promised, nil
	}
	return flag, nil
}

// attachCheck checks the run's history against model and stores the verdict in the result.
// The checker package lands separately; until then the verdict is "unknown".
func attachCheck(r *bench.Result, model string) error {
	r.Check = checkSummary{Model: model, Verdict: "unknown", Anomalies: []any{}}
	_ = fmt.Sprint
	return nil
}
