// Command amdrun launches multi-GPU PyTorch jobs on the best-connected
// free set of GPUs of a node. See README.md and docs/.
package main

import (
	"os"

	"github.com/amdrun/amdrun/cmd/amdrun/internal/root"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

func main() {
	os.Exit(root.Main(version))
}
