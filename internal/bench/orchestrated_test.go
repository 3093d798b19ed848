package bench

import (
	"encoding/json"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/hpsearch/hpsearch/internal/spec"
)

// examplesDir holds the problems as command workloads.
const examplesDir = "../../examples/bench"

func TestExampleSpacesAreTheProblems(t *testing.T) {
	for _, p := range Problems() {
		sp, err := LoadSpace(examplesDir, p)
		if err != nil {
			t.Fatal(err)
		}
		if sp.Name != "bench-"+p.Name || sp.Trainer.Command[len(sp.Trainer.Command)-1] != p.Name {
			t.Errorf("%s: study %q runs %v", p.Name, sp.Name, sp.Trainer.Command)
		}
	}
	// A space whose parameters differ from the problem's is refused.
	dir := t.TempDir()
	data, err := os.ReadFile(filepath.Join(examplesDir, "branin.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	bad := strings.Replace(string(data), "x1: {type: float, min: 0, max: 15}", "x1: {type: float, min: 0, max: 16}", 1)
	if err := os.WriteFile(filepath.Join(dir, "branin.yaml"), []byte(bad), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadSpace(dir, Branin()); err == nil || !strings.Contains(err.Error(), "not those of the problem branin") {
		t.Errorf("LoadSpace of a changed space: %v", err)
	}
}

// TestObjectiveScriptMatches checks that the command workload computes the
// functions of the problems: at their minima and at random points, given
// the point on the command line and in a parameters file.
func TestObjectiveScriptMatches(t *testing.T) {
	python, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("python3 is not installed; the command workloads need it")
	}
	script := filepath.Join(examplesDir, "objective.py")
	run := func(t *testing.T, env []string, args ...string) float64 {
		t.Helper()
		cmd := exec.Command(python, append([]string{script}, args...)...)
		cmd.Env = append(os.Environ(), env...)
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("objective.py %v: %v", args, err)
		}
		var m map[string]float64
		if err := json.Unmarshal(out, &m); err != nil {
			t.Fatalf("objective.py printed %q: %v", out, err)
		}
		return m[ObjectiveMetric]
	}
	rng := rand.New(rand.NewPCG(4, 5))
	for _, p := range Problems() {
		t.Run(p.Name, func(t *testing.T) {
			x := make([]float64, p.Dim())
			for i, b := range p.Bounds {
				x[i] = b[0] + rng.Float64()*(b[1]-b[0])
			}
			for _, pt := range [][]float64{p.Argmin[0], x} {
				args := []string{p.Name}
				for _, v := range pt {
					args = append(args, strconv.FormatFloat(v, 'g', -1, 64))
				}
				got, want := run(t, nil, args...), p.F(pt)
				if math.Abs(got-want) > 1e-12*math.Max(1, math.Abs(want)) {
					t.Errorf("objective.py at %v = %v, want %v", pt, got, want)
				}
			}
			params := map[string]float64{}
			for i, v := range x {
				params[ParamName(i)] = v
			}
			b, _ := json.Marshal(params)
			file := filepath.Join(t.TempDir(), "params.json")
			if err := os.WriteFile(file, b, 0o644); err != nil {
				t.Fatal(err)
			}
			if got, want := run(t, []string{"HPSEARCH_PARAMS_FILE=" + file}, p.Name), p.F(x); math.Abs(got-want) > 1e-12*math.Max(1, math.Abs(want)) {
				t.Errorf("objective.py with %s = %v, want %v", b, got, want)
			}
		})
	}
}

func TestOrchestratorConfigNeedsDirectories(t *testing.T) {
	if _, err := RunOrchestrated(t.Context(), OrchestratorConfig{Samplers: []spec.SamplerType{spec.Random}}); err == nil {
		t.Error("no ExamplesDir and StateDir: no error")
	}
}
