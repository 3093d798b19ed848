// Package placement decides where a trial runs: on the study's function
// backend, or on its persistent (GPU) worker pool. The rule compares the
// trial's declared resources (the space file's resources section, whose
// model size may depend on the trial's parameters) with what the backend
// offers and with the pool's model-size threshold.
package placement

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/hpsearch/hpsearch/internal/hptype"
	"github.com/hpsearch/hpsearch/internal/spec"
)

// Place decides where the trial with params runs. A trial goes to the pool
// when the backend cannot run it (GPUs, memory, segment time) or when its
// model has more parameters than the pool's threshold; otherwise to the
// backend. Without a pool every trial runs on the backend.
func Place(sp *spec.Spec, params hptype.Params) (hptype.Placement, error) {
	r := sp.Resources
	size, sized := 0.0, false
	if r.ModelParams != nil {
		n, err := r.ModelParams.Eval(params)
		if err != nil {
			return hptype.Placement{}, fmt.Errorf("resources.model_params: %w", err)
		}
		size, sized = n, true
	}
	p := sp.Pool
	if p == nil {
		return hptype.Placement{Reason: fmt.Sprintf("no pool: runs on the %s backend", sp.Backend.Type)}, nil
	}
	if why := sp.Backend.Refuses(r); why != "" {
		return hptype.Placement{Pool: p.Name, Reason: why}, nil
	}
	if sized && size > p.Threshold {
		return hptype.Placement{Pool: p.Name, Reason: fmt.Sprintf("model_params %s > %s (pool.threshold)", count(size), count(p.Threshold))}, nil
	}
	why := fmt.Sprintf("fits the %s backend", sp.Backend.Type)
	if sized {
		why += fmt.Sprintf(": model_params %s <= %s", count(size), count(p.Threshold))
	}
	return hptype.Placement{Reason: why}, nil
}

// count writes a parameter count briefly: 1.2e+08 as 1.2e8.
func count(n float64) string {
	s := strconv.FormatFloat(n, 'g', 3, 64)
	return strings.NewReplacer("e+0", "e", "e+", "e").Replace(s)
}
