package main

import (
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// A node of a local cluster learns which regions a partition cuts it off from, how far its
// clock is stepped, and which regions its frames are slowed to, from files in its data
// directory, written by `meridian cluster chaos --partitions`, `--skews` and `--slowdowns`, which then sends it SIGUSR1 to read them again (the same
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

// slowdownFile names the regions a node's frames to are slowed, one per line with the extra
// delay ("BJ 300ms"); none when absent.
const slowdownFile = "slowdown"

// readSlowdown returns the slowdown nodeDir's slowdown file holds.
func readSlowdown(nodeDir string) (map[string]time.Duration, error) {
	data, err := os.ReadFile(filepath.Join(nodeDir, slowdownFile))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("slowdown file: %w", err)
	}
	out := map[string]time.Duration{}
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		var by time.Duration
		if len(f) == 2 {
			by, err = time.ParseDuration(f[1])
		}
		if len(f) != 2 || err != nil || by <= 0 {
			return nil, fmt.Errorf("slowdown file: line %q: want a region and a positive duration, e.g. BJ 300ms", line)
		}
		out[f[0]] = by
	}
	return out, nil
}

// writeSlowdown replaces nodeDir's slowdown file with by, or removes it for none, renamed into
// place as writePartition's is.
func writeSlowdown(nodeDir string, by map[string]time.Duration) error {
	path := filepath.Join(nodeDir, slowdownFile)
	if len(by) == 0 {
		if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		return nil
	}
	var b strings.Builder
	for _, r := range slices.Sorted(maps.Keys(by)) {
		fmt.Fprintf(&b, "%s %s\n", r, by[r])
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(b.String()), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// slowdownText writes a slowdown as status and chaos show it: "BJ +300ms, SG +1s".
func slowdownText(by map[string]time.Duration) string {
	var parts []string
	for _, r := range slices.Sorted(maps.Keys(by)) {
		parts = append(parts, r+" +"+by[r].String())
	}
	return strings.Join(parts, ", ")
}

// leftByChaos describes what nodeDir's chaos files still do to its node ("cut from BJ, SG",
// "clock step of +20ms", "slowdown to BJ +300ms", or several), or "" for nothing.
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
	switch slow, err := readSlowdown(nodeDir); {
	case err != nil:
		what = append(what, "unreadable slowdown file")
	case len(slow) > 0:
		what = append(what, "slowdown to "+slowdownText(slow))
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
