package launch

// Supported says whether Run can start workers on this system: only on
// Linux (process groups, parent-death signals, affinity, flock leases).
// Plans can be made anywhere.
const Supported = true
