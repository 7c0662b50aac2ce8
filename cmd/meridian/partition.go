package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// A node of a local cluster learns which regions a partition cuts it off from from a file in
// its data directory, written by `meridian cluster chaos --partitions`, which then sends it
// SIGUSR1 to read it again (the same privilege as the SIGKILL chaos crashes nodes with, so no
// network endpoint can cut a node off). A node restarted during a partition reads the file as
// it starts and comes back on its side of it.

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
