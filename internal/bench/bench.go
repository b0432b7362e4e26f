// Package bench measures the node's device-to-device and host-to-device
// copy bandwidth with a PyTorch probe carried inside amdrun, caches the
// results per host and devices, and applies them to a topology model.
package bench

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/amdrun/amdrun/internal/discover"
	"github.com/amdrun/amdrun/internal/topology"
	"github.com/amdrun/amdrun/internal/topology/rbt"
)

// probe is the Python source of the probe.
//
//go:embed probe.py
var probe string

// Result is one measurement of a node.
type Result struct {
	Host       string    `json:"host"`
	MeasuredAt time.Time `json:"measured_at"`
	// Keys are the measured devices' identities (topology.Device.Key):
	// the cache is valid while they are unchanged.
	Keys []string `json:"keys"`
	// Devices are the model indices measured, in the same order as Keys.
	Devices []int `json:"devices"`
	// D2D[i][j] is the copy bandwidth in MB/s from Devices[i] to
	// Devices[j] (0 on the diagonal).
	D2D [][]float64 `json:"d2d_mb_s"`
	// H2D maps a NUMA node to its host-to-device MB/s per device.
	H2D map[int][]float64 `json:"h2d_mb_s,omitempty"`
	// NoP2P lists the pairs (positions in Devices) without P2P access.
	NoP2P   [][2]int `json:"no_p2p,omitempty"`
	SizeMiB int      `json:"size_mib"`
	Iters   int      `json:"iters"`
}

// Line is one line of probe output.
type Line struct {
	Kind    string  `json:"kind"`
	Devices int     `json:"devices"`
	A       int     `json:"a"`
	B       int     `json:"b"`
	Dev     int     `json:"dev"`
	MBps    float64 `json:"mbps"`
}

// ParseLine parses one probe output line.
func ParseLine(b []byte) (Line, error) {
	var l Line
	if err := json.Unmarshal(b, &l); err != nil {
		return l, fmt.Errorf("bench probe: bad output line %q: %w", truncate(string(b)), err)
	}
	switch l.Kind {
	case "plan", "d2d", "h2d":
	default:
		return l, fmt.Errorf("bench probe: unknown line kind %q", l.Kind)
	}
	if l.MBps < 0 || l.A < 0 || l.B < 0 || l.Dev < 0 {
		return l, fmt.Errorf("bench probe: negative figure in %q", truncate(string(b)))
	}
	return l, nil
}

func truncate(s string) string {
	if len(s) > 80 {
		return s[:80] + "..."
	}
	return s
}

// Key is the cache key of a set of device identities.
func Key(keys []string) string {
	h := sha256.Sum256([]byte(strings.Join(keys, "\n")))
	return hex.EncodeToString(h[:8])
}

// CacheDir is $XDG_CACHE_HOME/amdrun, else ~/.cache/amdrun.
func CacheDir(getenv func(string) string) (string, error) {
	if d := getenv("XDG_CACHE_HOME"); d != "" {
		return filepath.Join(d, "amdrun"), nil
	}
	home := getenv("HOME")
	if home == "" {
		return "", errors.New("bench cache: neither XDG_CACHE_HOME nor HOME is set")
	}
	return filepath.Join(home, ".cache", "amdrun"), nil
}

// CachePath is where the measurement of these devices on host is kept.
func CachePath(dir, host string, keys []string) string {
	return filepath.Join(dir, fmt.Sprintf("bench-%s-%s.json", sanitize(host), Key(keys)))
}

// sanitize makes a host name part of a file name.
var sanitize = strings.NewReplacer("/", "_", "\x00", "_", `\`, "_").Replace

// Save writes r to path atomically.
func Save(path string, r *Result) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("bench cache: %w", err)
	}
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		return fmt.Errorf("bench cache: %w", err)
	}
	return os.Rename(tmp, path)
}

// Load reads a cached result for exactly these device keys; it returns
// (nil, nil) when there is none, and an error for a corrupt file.
func Load(path string, keys []string) (*Result, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("bench cache: %w", err)
	}
	var r Result
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, topology.JSONError("bench cache "+path, b, err)
	}
	if strings.Join(r.Keys, "\n") != strings.Join(keys, "\n") {
		return nil, nil // the devices changed: the measurement is stale
	}
	if len(r.D2D) != len(r.Devices) {
		return nil, fmt.Errorf("bench cache %s: matrix is %d rows for %d devices", path, len(r.D2D), len(r.Devices))
	}
	return &r, nil
}

// Apply replaces the bandwidth of every measured pair's link with the
// measurement (Min the slower direction, Max the faster) and sets
// m.Bandwidth to "measured".
func Apply(m *topology.Model, r *Result) error {
	for _, d := range r.Devices {
		if d < 0 || d >= m.N() {
			return fmt.Errorf("bench: measured device %d is not in the topology (%d devices)", d, m.N())
		}
	}
	for i, a := range r.Devices {
		if len(r.D2D[i]) != len(r.Devices) {
			return fmt.Errorf("bench: matrix row %d has %d cells, want %d", i, len(r.D2D[i]), len(r.Devices))
		}
		for j := i + 1; j < len(r.Devices); j++ {
			b := r.Devices[j]
			x, y := r.D2D[i][j], r.D2D[j][i]
			if x <= 0 || y <= 0 {
				continue
			}
			l := m.Link(a, b)
			l.MinBandwidth, l.MaxBandwidth = int64(min(x, y)), int64(max(x, y))
			l.Measured, l.Assumed = true, false
			l.P2P = topology.P2PAvailable
		}
	}
	for _, p := range r.NoP2P {
		if p[0] < 0 || p[1] < 0 || p[0] >= len(r.Devices) || p[1] >= len(r.Devices) || p[0] == p[1] {
			return fmt.Errorf("bench: pair %d-%d without P2P is not among the %d measured devices", p[0], p[1], len(r.Devices))
		}
		m.Link(r.Devices[p[0]], r.Devices[p[1]]).P2P = topology.P2PUnavailable
	}
	m.Bandwidth = "measured"
	return m.Validate()
}

// Step is one probe run: argv, environment, and the NUMA node it stands
// for (-1: none).
type Step struct {
	Argv []string
	Env  []string
	NUMA int
	Mode string // "d2d" or "h2d"
}

// Progress is called after every measured figure: done of total, elapsed.
type Progress func(done, total int, elapsed time.Duration)

// RunSteps runs the probe steps in order, streaming their lines into r.
func RunSteps(ctx context.Context, steps []Step, r *Result, progress Progress) error {
	n := len(r.Devices)
	r.D2D = make([][]float64, n)
	for i := range r.D2D {
		r.D2D[i] = make([]float64, n)
	}
	c := stepCounter{start: time.Now(), progress: progress}
	for _, s := range steps {
		if s.Mode == "d2d" {
			c.total += n * (n - 1)
		} else {
			c.total += n
		}
	}
	for _, s := range steps {
		if err := runStep(ctx, s, r, &c); err != nil {
			return err
		}
	}
	r.MeasuredAt = time.Now().UTC()
	return nil
}

// stepCounter counts the figures measured for RunSteps's progress.
type stepCounter struct {
	done, total int
	start       time.Time
	progress    Progress
}

// runStep runs one probe step, recording its lines into r.
func runStep(ctx context.Context, s Step, r *Result, c *stepCounter) error {
	cmd := exec.CommandContext(ctx, s.Argv[0], s.Argv[1:]...)
	cmd.Env = s.Env
	var errBuf bytes.Buffer
	cmd.Stderr = &errBuf
	out, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("bench: start %s: %w", s.Argv[0], err)
	}
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		l, perr := ParseLine(sc.Bytes())
		if perr == nil {
			perr = record(l, s, r, c)
		}
		if perr != nil {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
			return perr
		}
		if c.progress != nil {
			c.progress(c.done, c.total, time.Since(c.start))
		}
	}
	if err := cmd.Wait(); err != nil {
		msg := strings.TrimSpace(errBuf.String())
		msg = msg[strings.LastIndexByte(msg, '\n')+1:] // the last line
		return fmt.Errorf("bench: probe (%s) failed: %v: %s", s.Mode, err, msg)
	}
	return nil
}

// record files one probe line of step s into r.
func record(l Line, s Step, r *Result, c *stepCounter) error {
	n := len(r.Devices)
	switch l.Kind {
	case "plan":
		if l.Devices != n {
			return fmt.Errorf("bench: torch sees %d devices, amdrun made %d visible", l.Devices, n)
		}
	case "d2d":
		if l.A >= n || l.B >= n {
			return fmt.Errorf("bench probe: device %d/%d out of range", l.A, l.B)
		}
		r.D2D[l.A][l.B] = l.MBps
		c.done++
	case "h2d":
		if l.Dev >= n {
			return fmt.Errorf("bench probe: device %d out of range", l.Dev)
		}
		if r.H2D == nil {
			r.H2D = map[int][]float64{}
		}
		if r.H2D[s.NUMA] == nil {
			r.H2D[s.NUMA] = make([]float64, n)
		}
		r.H2D[s.NUMA][l.Dev] = l.MBps
		c.done++
	}
	return nil
}

// FromRBT turns rocm_bandwidth_test output into a Result for the devices
// of m, to cache like the probe's (rbt.Result.Copies); m is not changed.
func FromRBT(m *topology.Model, out []byte, host string, warn topology.Warner) (*Result, error) {
	res, err := rbt.Parse(bytes.NewReader(out))
	if err != nil {
		return nil, err
	}
	res.Here = true // run here, by amdrun: HIP's order is the tool's
	c, err := res.Copies(m, warn)
	if err != nil {
		return nil, err
	}
	n := m.N()
	r := &Result{Host: host, MeasuredAt: time.Now().UTC(), Keys: m.Keys(), Devices: make([]int, n), D2D: c.MBps}
	known := false
	var noP2P []string
	for a := 0; a < n; a++ {
		r.Devices[a] = a
		for b := a + 1; b < n; b++ {
			switch {
			case c.MBps[a][b] > 0 || c.MBps[b][a] > 0:
				known = true
			case c.P2P[a][b] == topology.P2PUnavailable:
				known = true
				r.NoP2P = append(r.NoP2P, [2]int{a, b})
				noP2P = append(noP2P, fmt.Sprintf("%d-%d", a, b))
			}
		}
	}
	if !known && n > 1 {
		return nil, fmt.Errorf("%s: %w", rbt.Source, rbt.ErrNoPeerFigures)
	}
	if len(noP2P) > 0 {
		warn.Warn("%s: no peer-to-peer access between GPU %s; copies between them go through host memory", rbt.Source, strings.Join(noP2P, ", "))
	}
	return r, nil
}

// RBTNextArgs make rocm-bandwidth-test 7.x print copy matrices (its
// TransferBench plugin's p2p run); bare, it prints its help.
var RBTNextArgs = []string{"plugin", "--run", "tb", "p2p"}

// MeasureWithTool runs rocm_bandwidth_test with no time limit and returns
// FromRBT of its output, running it again with RBTNextArgs when the bare
// run fails or prints no matrix.
func MeasureWithTool(ctx context.Context, m *topology.Model, tool, host string, warn topology.Warner) (*Result, error) {
	return measureTool(func(args ...string) ([]byte, error) { return discover.RunTool(ctx, 0, tool, args...) }, m, host, warn)
}

// measureTool is MeasureWithTool with the tool run by run.
func measureTool(run func(args ...string) ([]byte, error), m *topology.Model, host string, warn topology.Warner) (*Result, error) {
	out, err := run()
	if err == nil {
		r, perr := FromRBT(m, out, host, warn)
		if !errors.Is(perr, topology.ErrWrongTool) {
			return r, perr
		}
	}
	next, nerr := run(RBTNextArgs...)
	if nerr != nil {
		if err != nil {
			return nil, err // an old tool that failed: its own error says why
		}
		return nil, nerr
	}
	return FromRBT(m, next, host, warn)
}
