package topology

import "context"

// Runner runs an external tool and returns its standard output; a tool not
// on PATH gives ErrToolNotFound and a non-zero exit a *ToolError. Sources
// take one so that they never start a process themselves.
type Runner func(ctx context.Context, name string, args ...string) ([]byte, error)
