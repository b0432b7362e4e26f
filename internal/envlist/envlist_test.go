package envlist

import (
	"reflect"
	"testing"
)

// TestEnvRuleIsOne: Map, Lookup and Get read an environment the
// same way (the one rule of issue 12): the last assignment wins, and an
// entry without '=' sets nothing. Before, Map took "B" for B="" while
// Lookup said B was unset, so a dry run and the launcher disagreed.
func TestEnvRuleIsOne(t *testing.T) {
	env := []string{"A=1", "B", "A=2", "C=x=y", "D="}
	want := map[string]string{"A": "2", "C": "x=y", "D": ""}
	if got := Map(env); !reflect.DeepEqual(got, want) {
		t.Errorf("Map = %v, want %v", got, want)
	}
	for _, k := range []string{"A", "B", "C", "D", "E"} {
		v, ok := Lookup(env, k)
		mv, mok := want[k]
		if v != mv || ok != mok || Get(env, k) != mv {
			t.Errorf("%s: Lookup = %q, %v; Map = %q, %v", k, v, ok, mv, mok)
		}
	}
}
