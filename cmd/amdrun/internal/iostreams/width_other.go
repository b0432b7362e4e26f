//go:build !unix

package iostreams

import "os"

// terminalWidth is 0 (not known) where there is no TIOCGWINSZ.
func terminalWidth(*os.File) int { return 0 }
