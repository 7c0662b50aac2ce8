package main

import (
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/meridiandb/meridian/configs"
	mrt "github.com/meridiandb/meridian/internal/runtime"
)

// The data directories the README's cluster commands create in the source tree are ignored by
// git: the built-in configurations' where meridian runs (the repository's root), and a shipped
// file's given by path beside it in configs/. None was, and `git status` listed every store.
func TestClusterDataDirsIgnoredByGit(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("no git")
	}
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	if exec.Command("git", "-C", root, "rev-parse", "--git-dir").Run() != nil {
		t.Skip("not in a git work tree")
	}
	for _, name := range configs.Names() {
		cfg, err := mrt.Load(name)
		if err != nil {
			t.Fatal(err)
		}
		for _, dir := range []string{cfg.DataDir, filepath.Join("configs", cfg.DataDir)} {
			// --no-index: a store already added by mistake is still reported as ignored.
			path := filepath.Join(dir, "sh-1", "CURRENT")
			if err := exec.Command("git", "-C", root, "check-ignore", "-q", "--no-index", path).Run(); err != nil {
				t.Errorf("%s (data of %s): not ignored by git (%v)", path, name, err)
			}
		}
	}
	for _, kept := range []string{"configs/k2-3region.toml", "configs/configs.go"} {
		if exec.Command("git", "-C", root, "check-ignore", "-q", "--no-index", kept).Run() == nil {
			t.Errorf("%s is ignored by git", kept)
		}
	}
}
