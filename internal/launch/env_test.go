package launch

import (
	"reflect"
	"testing"
)

// TestEnvRuleIsOne: EnvMap, LookupEnv and Getenv read an environment the
// same way (the one rule of issue 12): the last assignment wins, and an
// entry without '=' sets nothing. Before, EnvMap took "B" for B="" while
// LookupEnv said B was unset, so a dry run and the launcher disagreed.
func TestEnvRuleIsOne(t *testing.T) {
	env := []string{"A=1", "B", "A=2", "C=x=y", "D="}
	want := map[string]string{"A": "2", "C": "x=y", "D": ""}
	if got := EnvMap(env); !reflect.DeepEqual(got, want) {
		t.Errorf("EnvMap = %v, want %v", got, want)
	}
	for _, k := range []string{"A", "B", "C", "D", "E"} {
		v, ok := LookupEnv(env, k)
		mv, mok := want[k]
		if v != mv || ok != mok || Getenv(env, k) != mv {
			t.Errorf("%s: LookupEnv = %q, %v; EnvMap = %q, %v", k, v, ok, mv, mok)
		}
	}
}
