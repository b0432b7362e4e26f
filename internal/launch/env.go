package launch

import "strings"

// LookupEnv finds key in a KEY=VAL list. The last assignment wins, as it
// does for a program exec'd with that list; this is the one rule amdrun
// uses to read an environment, so that every command agrees with what a
// rank will see.
func LookupEnv(env []string, key string) (string, bool) {
	val, ok := "", false
	for _, kv := range env {
		if k, v, found := strings.Cut(kv, "="); found && k == key {
			val, ok = v, true
		}
	}
	return val, ok
}

// Getenv is LookupEnv without the found flag: "" when key is unset.
func Getenv(env []string, key string) string {
	v, _ := LookupEnv(env, key)
	return v
}

// EnvMap returns env as a map by LookupEnv's rule: the last assignment
// of a key wins, and an entry without '=' sets nothing.
func EnvMap(env []string) map[string]string {
	m := make(map[string]string, len(env))
	for _, kv := range env {
		if k, v, ok := strings.Cut(kv, "="); ok {
			m[k] = v
		}
	}
	return m
}
