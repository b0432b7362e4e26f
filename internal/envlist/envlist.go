// Package envlist reads environments given as KEY=VAL lists (what exec
// takes) by the one rule amdrun uses: the last assignment of a key wins,
// and an entry without '=' sets nothing. It is a leaf: every package that
// reads an environment list (launch, job, slurm, the commands) shares it.
package envlist

import "strings"

// Lookup finds key in a KEY=VAL list. The last assignment wins, as it
// does for a program exec'd with that list; this is the one rule amdrun
// uses to read an environment, so that every command agrees with what a
// rank will see.
func Lookup(env []string, key string) (string, bool) {
	val, ok := "", false
	for _, kv := range env {
		if k, v, found := strings.Cut(kv, "="); found && k == key {
			val, ok = v, true
		}
	}
	return val, ok
}

// Get is Lookup without the found flag: "" when key is unset.
func Get(env []string, key string) string {
	v, _ := Lookup(env, key)
	return v
}

// Map returns env as a map by Lookup's rule: the last assignment
// of a key wins, and an entry without '=' sets nothing.
func Map(env []string) map[string]string {
	m := make(map[string]string, len(env))
	for _, kv := range env {
		if k, v, ok := strings.Cut(kv, "="); ok {
			m[k] = v
		}
	}
	return m
}
