package placement_test

import (
	"strings"
	"testing"

	"github.com/hpsearch/hpsearch/internal/hptype"
	"github.com/hpsearch/hpsearch/internal/placement"
	"github.com/hpsearch/hpsearch/internal/spec"
)

const space = `name: p
objective: {metric: loss, goal: minimize}
parameters:
  layers: {type: int, min: 2, max: 48}
  hidden: {type: categorical, values: [1024, 4096]}
trainer: {builtin: digits-mlp}
max_trials: 4
backend: {type: lambda, function: trainer, memory_mb: 4096}
checkpoint: {store: 's3://b/p'}
`

func TestPlace(t *testing.T) {
	for _, tc := range []struct {
		name    string
		extra   string
		params  hptype.Params
		pool    string
		because string
	}{
		{"no pool", "resources: {model_params: '12 * layers * pow(hidden, 2)'}\n", hptype.Params{"layers": int64(48), "hidden": int64(4096)}, "", "no pool: runs on the lambda backend"},
		{"small model", poolSection + "resources: {model_params: '12 * layers * pow(hidden, 2)'}\n", hptype.Params{"layers": int64(12), "hidden": int64(1024)}, "", "fits the lambda backend: model_params 1.51e8 <= 1e9"},
		{"large model", poolSection + "resources: {model_params: '12 * layers * pow(hidden, 2)'}\n", hptype.Params{"layers": int64(48), "hidden": int64(4096)}, "gpu", "model_params 9.66e9 > 1e9 (pool.threshold)"},
		{"at the threshold", poolSection + "resources: {model_params: 1e9}\n", hptype.Params{}, "", "model_params 1e9 <= 1e9"},
		{"needs a GPU", poolSection + "resources: {gpu: 1}\n", hptype.Params{}, "gpu", "a trial needs 1 GPU(s) and the lambda backend has 0"},
		{"needs more memory", poolSection + "resources: {memory_mb: 20000}\n", hptype.Params{}, "gpu", "a trial needs 20000 MB and the lambda backend has 4096 MB"},
		{"long segments", poolSection + "resources: {segment_time: 30m}\n", hptype.Params{}, "gpu", "a segment takes 30m0s and a lambda segment may last at most 15m0s"},
		{"table", poolSection + "resources: {model_params: {param: hidden, values: {'1024': 1e8, '4096': 2e9}}}\n", hptype.Params{"hidden": int64(4096)}, "gpu", "model_params 2e9 > 1e9"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sp, err := spec.Decode("space.yaml", []byte(space+tc.extra))
			if err != nil {
				t.Fatal(err)
			}
			got, err := placement.Place(sp, tc.params)
			if err != nil {
				t.Fatal(err)
			}
			if got.Pool != tc.pool || !strings.Contains(got.Reason, tc.because) {
				t.Errorf("Place = %+v, want pool %q because %q", got, tc.pool, tc.because)
			}
		})
	}
}

const poolSection = "pool: {name: gpu, instance_type: g5.xlarge}\n"

func TestPlaceReportsAnUnknownValue(t *testing.T) {
	sp, err := spec.Decode("space.yaml", []byte(space+poolSection+"resources: {model_params: layers * 1e8}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := placement.Place(sp, hptype.Params{}); err == nil || !strings.Contains(err.Error(), `parameter "layers" is not set`) {
		t.Errorf("Place without the parameter = %v, want an error naming it", err)
	}
}
