package main

import (
	"os"
	"path/filepath"
	"testing"
)

// writeValue leaves a new file readable as any file the user creates (not CreateTemp's 0600),
// and a replaced one with the mode it had.
func TestWriteValueFileMode(t *testing.T) {
	dir := t.TempDir()
	fresh := filepath.Join(dir, "got.jpg")
	if err := writeValue(fresh, []byte("v")); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(fresh); err != nil || fi.Mode().Perm() != 0o644 {
		t.Errorf("a new --value-file: mode %v (%v), want -rw-r--r--", fi.Mode(), err)
	}
	kept := filepath.Join(dir, "kept")
	if err := os.WriteFile(kept, nil, 0o640); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(kept, 0o640); err != nil {
		t.Fatal(err)
	}
	if err := writeValue(kept, []byte("v")); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(kept); err != nil || fi.Mode().Perm() != 0o640 {
		t.Errorf("a replaced --value-file: mode %v (%v), want the -rw-r----- it had", fi.Mode(), err)
	}
}
