package topology

import "context"

// Runner runs an external tool and returns its standard output. The real
// one (internal/discover) returns an error wrapping ErrToolNotFound when
// the tool is not on PATH and a *ToolError when it exits non-zero. Sources
// take a Runner so that they never start a process themselves.
type Runner func(ctx context.Context, name string, args ...string) ([]byte, error)
