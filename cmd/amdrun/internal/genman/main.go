// Command genman writes amdrun's man pages (amdrun.1, amdrun-topo.1, ...)
// from its command tree with cobra's doc generator, for make dist:
//
//	go run ./cmd/amdrun/internal/genman DIR
//
// It is a program of its own so that the generator and its markdown
// renderer (cpuguy83/go-md2man, russross/blackfriday) stay out of the
// amdrun binary. The pages' date is $SOURCE_DATE_EPOCH (cobra reads it),
// so two builds of one commit give the same pages.
package main

import (
	"fmt"
	"os"

	"github.com/amdrun/amdrun/cmd/amdrun/internal/cmdutil"
	"github.com/amdrun/amdrun/cmd/amdrun/internal/root"
	"github.com/spf13/cobra/doc"
)

func main() {
	if len(os.Args) != 2 || os.Args[1] == "" {
		fmt.Fprintln(os.Stderr, "usage: genman DIR")
		os.Exit(2)
	}
	if os.Getenv("SOURCE_DATE_EPOCH") == "" {
		fmt.Fprintln(os.Stderr, "genman: set SOURCE_DATE_EPOCH (the pages' date; make dist sets the commit's)")
		os.Exit(2)
	}
	cmd := root.NewCmdRoot(cmdutil.New(os.Getenv("AMDRUN_VERSION")))
	cmd.DisableAutoGenTag = true // its "Auto generated ... on DATE" line
	header := &doc.GenManHeader{Title: "AMDRUN", Section: "1", Source: "amdrun " + os.Getenv("AMDRUN_VERSION"), Manual: "amdrun manual"}
	if err := os.MkdirAll(os.Args[1], 0o755); err != nil {
		fmt.Fprintf(os.Stderr, "genman: %v\n", err)
		os.Exit(1)
	}
	if err := doc.GenManTree(cmd, header, os.Args[1]); err != nil {
		fmt.Fprintf(os.Stderr, "genman: %v\n", err)
		os.Exit(1)
	}
}
