package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// A node of a local cluster learns which regions a partition cuts it off from, and how far its
// clock is stepped, from files in its data directory, written by `meridian cluster chaos
// --partitions` and `--skews`, which then sends it SIGUSR1 to read them again (the same
// privilege as the SIGKILL chaos crashes nodes with, so no network endpoint can cut a node off
// or move its clock). A node restarted during a partition or a step reads the files as it
// starts and comes back on its side of the cut, with its clock where it was.

// partitionFile names the regions, one per line, a node is cut off from; none when absent.
const partitionFile = "partition"

// readPartition returns the regions nodeDir's partition file names.
func readPartition(nodeDir string) ([]string, error) {
	data, err := os.ReadFile(filepath.Join(nodeDir, partitionFile))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("partition file: %w", err)
	}
	return strings.Fields(string(data)), nil
}

// writePartition replaces nodeDir's partition file with regions, or removes it for none. The
// file is renamed into place, so a node that reads it meanwhile sees the old list or the new.
func writePartition(nodeDir string, regions []string) error {
	path := filepath.Join(nodeDir, partitionFile)
	if len(regions) == 0 {
		if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		return nil
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(strings.Join(regions, "\n")+"\n"), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// clockStepFile holds how far a node's clock is stepped (a duration such as -12.5ms); none when
// absent.
const clockStepFile = "clock-step"

// readClockStep returns the step nodeDir's clock-step file holds.
func readClockStep(nodeDir string) (time.Duration, error) {
	data, err := os.ReadFile(filepath.Join(nodeDir, clockStepFile))
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("clock-step file: %w", err)
	}
	step, err := time.ParseDuration(strings.TrimSpace(string(data)))
	if err != nil {
		return 0, fmt.Errorf("clock-step file: %w", err)
	}
	return step, nil
}

// writeClockStep replaces nodeDir's clock-step file with step, or removes it for none, renamed
// into place as writePartition's is.
func writeClockStep(nodeDir string, step time.Duration) error {
	path := filepath.Join(nodeDir, clockStepFile)
	if step == 0 {
		if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		return nil
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(step.String()+"\n"), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// leftByChaos describes what nodeDir's chaos files still do to its node ("cut from BJ, SG",
// "clock step of +20ms", or both), or "" for nothing.
func leftByChaos(nodeDir string) string {
	var what []string
	if cut, _ := readPartition(nodeDir); len(cut) > 0 {
		what = append(what, "cut from "+strings.Join(cut, ", "))
	}
	switch step, err := readClockStep(nodeDir); {
	case err != nil:
		what = append(what, "unreadable clock-step file")
	case step != 0:
		what = append(what, "clock step of "+signedDuration(step))
	}
	return strings.Join(what, " and ")
}

// signedDuration writes d with its sign, as a step reads: +20ms, -1.5ms.
func signedDuration(d time.Duration) string {
	if d > 0 {
		return "+" + d.String()
	}
	return d.String()
}
