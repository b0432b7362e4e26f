package root

import "github.com/amdrun/amdrun/internal/selector"

// usageErrors are errors of the request that exit with ExitUsage.
var usageErrors = []error{selector.ErrBadRequest, selector.ErrUnknownPolicy}
