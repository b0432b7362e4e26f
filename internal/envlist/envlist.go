// Package envlist reads KEY=VAL environment lists by amdrun's one rule:
// the last assignment of a key wins, as for a program exec'd with the
// list, and an entry without '=' sets nothing.
package envlist

import "strings"

// Lookup finds key in a KEY=VAL list by the package's rule.
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

// Map returns env as a map by the package's rule.
func Map(env []string) map[string]string {
	m := make(map[string]string, len(env))
	for _, kv := range env {
		if k, v, ok := strings.Cut(kv, "="); ok {
			m[k] = v
		}
	}
	return m
}
