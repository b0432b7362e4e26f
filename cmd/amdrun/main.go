// Command amdrun launches multi-GPU PyTorch jobs on the best-connected
// free set of GPUs of a node. See README.md and docs/.
package main

import (
	"os"

	"github.com/amdrun/amdrun/cmd/amdrun/internal/root"
)

// version is set with -ldflags "-X main.version=..." (make build, make
// dist); empty, amdrun reports version.FromBuild.
var version string

func main() {
	os.Exit(root.Main(version))
}
