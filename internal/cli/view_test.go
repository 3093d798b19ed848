package cli

import (
	"strings"
	"testing"

	"github.com/hpsearch/hpsearch/internal/coordinator"
	"github.com/hpsearch/hpsearch/internal/hptype"
	"github.com/hpsearch/hpsearch/internal/spec"
)

func TestStatusLine(t *testing.T) {
	sp := &spec.Spec{
		Objective: spec.Objective{Metric: "val_accuracy", Goal: spec.Maximize},
		Params:    []spec.Param{{Name: "lr", Type: spec.Float}, {Name: "units", Type: spec.Int}},
	}
	v := 0.975
	p := coordinator.Progress{MaxTrials: 20, Completed: 7, Running: 2, Failed: 1, CostUSD: 0.000123,
		Best: &hptype.Trial{Number: 4, Value: &v, Params: hptype.Params{"lr": 0.0125, "units": int64(64)}}}
	got := statusLine(sp, p, 75)
	want := "trials 7/20 done, 2 running, 1 failed | 1m15s | $0.000123 | best val_accuracy 0.9750 (trial 4: lr=0.0125 units=64)"
	if got != want {
		t.Fatalf("statusLine =\n%s\nwant\n%s", got, want)
	}
	for _, tc := range []struct {
		n    int
		want string
	}{
		{len(want), want},
		{40, "trials 7/20 done, 2 running, 1 failed |…"},
		{1, "…"},
	} {
		if got := fit(want, tc.n); got != tc.want || len([]rune(got)) > max(tc.n, 1) {
			t.Errorf("fit(_, %d) = %q, want %q", tc.n, got, tc.want)
		}
	}
	if strings.Contains(statusLine(sp, coordinator.Progress{MaxTrials: 3}, 1), "best") {
		t.Error("status line shows a best trial before any completed")
	}
}
