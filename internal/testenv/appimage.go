package testenv

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// AppUser is the user ("uid:gid") the images of ImportApp run as: not
// root, as a Pod with runAsNonRoot requires.
const AppUser = "65532:65532"

// ImportApp builds the Go program pkgPath of this repository (as the go
// command names it, e.g. "./internal/testenv/dbapp"), statically, and
// imports a one-layer image of it, run as AppUser, into the node's
// containerd as imageName (e.g. "ppt.local/dbapp:v1"): what a test's Pod
// runs with imagePullPolicy Never. Nothing comes from outside (the
// modules are the cache's, no proxy is asked), as for the pause image.
// Importing the same name again replaces the image.
func (n *Node) ImportApp(ctx context.Context, pkgPath, imageName string) error {
	entry := filepath.Base(pkgPath)
	file := strings.NewReplacer("/", "_", ":", "_").Replace(imageName)
	bin := filepath.Join(n.Dir, "image", file)
	build := exec.CommandContext(ctx, "go", "build", "-trimpath", "-ldflags=-s -w", "-o", bin, pkgPath) //nolint:gosec // the go command on this repository, into the node's directory
	build.Dir = RepoRoot()
	build.Env = append(os.Environ(), "CGO_ENABLED=0", "GOFLAGS=-mod=mod", "GOPROXY=off")
	if out, err := build.CombinedOutput(); err != nil {
		return fmt.Errorf("go build %s: %w\n%s", pkgPath, err, out)
	}
	tar := bin + ".tar"
	if err := writeOCIArchive(bin, entry, imageName, AppUser, tar); err != nil {
		return err
	}
	_, err := n.Ctr(ctx, "images", "import", tar)
	return err
}
