package launch

import (
	"reflect"
	"strings"
	"testing"

	"github.com/amdrun/amdrun/internal/plan"
)

func TestShimArgs(t *testing.T) {
	sa, err := parseShimArgs([]string{"--cpus", "0-3,8", "--mems", "1", "--mempolicy", "preferred", "--", "python", "--", "x y"})
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(sa.cpus, []int{0, 1, 2, 3, 8}) || !reflect.DeepEqual(sa.mems, []int{1}) || sa.policy != plan.MemPreferred ||
		!reflect.DeepEqual(sa.argv, []string{"python", "--", "x y"}) {
		t.Errorf("parsed %+v", sa)
	}
	for args, want := range map[string]string{
		"--cpus 0-1":           "missing -- before the command",
		"--cpus x -- w":        "--cpus: cpu list",
		"--mempolicy hot -- w": `unknown policy "hot"`,
		"--nice 3 -- w":        `unknown argument "--nice"`,
		"--cpus 1 --":          "no command after --",
		"--mems":               "--mems: missing value",
	} {
		_, err := parseShimArgs(strings.Fields(args))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("parseShimArgs(%s) error %v, want %q", args, err, want)
		}
	}
}
