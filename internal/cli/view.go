package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"golang.org/x/term"

	"github.com/hpsearch/hpsearch/internal/coordinator"
	"github.com/hpsearch/hpsearch/internal/hptype"
	"github.com/hpsearch/hpsearch/internal/spec"
)

func newLogger(w io.Writer) *slog.Logger {
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelWarn}))
}

// view shows a run's events: a live status line on a terminal, a line per
// event otherwise, or JSON lines.
type view struct {
	mu     sync.Mutex
	w      io.Writer
	sp     *spec.Spec
	json   bool
	tty    bool
	last   coordinator.Progress
	since  time.Time // when last was received
	drawn  bool
	done   chan struct{}
	closed sync.Once
}

func newView(w io.Writer, sp *spec.Spec, asJSON bool) *view {
	v := &view{w: w, sp: sp, json: asJSON, done: make(chan struct{})}
	if f, ok := w.(*os.File); ok && !asJSON && term.IsTerminal(int(f.Fd())) {
		v.tty = true
		go v.redraw()
	}
	return v
}

func (v *view) redraw() {
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-v.done:
			return
		case <-tick.C:
			v.mu.Lock()
			if !v.since.IsZero() {
				v.status()
			}
			v.mu.Unlock()
		}
	}
}

func (v *view) close() {
	v.closed.Do(func() {
		close(v.done)
		v.mu.Lock()
		defer v.mu.Unlock()
		if v.drawn {
			fmt.Fprint(v.w, "\r\033[K")
			v.drawn = false
		}
	})
}

func (v *view) event(e coordinator.Event) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.last, v.since = e.Progress, time.Now()
	if v.json {
		b, err := json.Marshal(e)
		if err == nil {
			fmt.Fprintln(v.w, string(b))
		}
		return
	}
	line := v.describe(e)
	if v.tty {
		if v.drawn {
			fmt.Fprint(v.w, "\r\033[K")
		}
		if line != "" {
			fmt.Fprintln(v.w, line)
		}
		v.status()
		return
	}
	if line != "" {
		fmt.Fprintf(v.w, "%s %s\n", e.Time.Local().Format("15:04:05"), line)
	}
}

// status draws the live status line.
func (v *view) status() {
	p := v.last
	elapsed := p.ElapsedSeconds + time.Since(v.since).Seconds()
	fmt.Fprintf(v.w, "\r\033[K%s", fit(statusLine(v.sp, p, elapsed), v.width()))
	v.drawn = true
}

// width is the terminal's width, so the status line never wraps.
func (v *view) width() int {
	if f, ok := v.w.(*os.File); ok {
		if w, _, err := term.GetSize(int(f.Fd())); err == nil && w > 1 {
			return w - 1
		}
	}
	return 120
}

// fit cuts s to at most n runes.
func fit(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:max(n-1, 0)]) + "…"
}

// statusLine is the live status: progress, time, cost, and the best trial
// so far with its parameters (last, so a narrow terminal cuts them first).
func statusLine(sp *spec.Spec, p coordinator.Progress, elapsed float64) string {
	pruned := ""
	if p.Pruned > 0 {
		pruned = fmt.Sprintf(", %d pruned", p.Pruned)
	}
	s := fmt.Sprintf("trials %d/%d done, %d running, %d failed%s | %s | $%.6f", p.Completed, p.MaxTrials, p.Running, p.Failed, pruned, formatDuration(elapsed), p.CostUSD)
	if p.Best != nil {
		s += fmt.Sprintf(" | best %s %.4f (trial %d: %s)", sp.Objective.Metric, *p.Best.Value, p.Best.Number, formatParams(sp, p.Best.Params))
	}
	return s
}

func (v *view) describe(e coordinator.Event) string {
	t := e.Trial
	switch e.Kind {
	case coordinator.StudyStarted:
		p := e.Progress
		if p.Created > 0 {
			return fmt.Sprintf("resuming study %s: %d/%d trials done", e.Study, p.Completed+p.Failed+p.Pruned, p.MaxTrials)
		}
		return fmt.Sprintf("study %s: %d trials, %d at a time, %s sampler, %s %s", e.Study, p.MaxTrials, v.sp.MaxConcurrency, v.sp.Sampler.Type, v.sp.Objective.Goal, v.sp.Objective.Metric)
	case coordinator.TrialStarted:
		if v.tty {
			return ""
		}
		if t.Segment > 0 {
			return fmt.Sprintf("trial %d segment %d started at %g (attempt %d)", t.Number, t.Segment, t.Resource, len(t.Attempts))
		}
		return fmt.Sprintf("trial %d started (attempt %d): %s", t.Number, len(t.Attempts), formatParams(v.sp, t.Params))
	case coordinator.TrialCompleted:
		mark := "  "
		if e.Progress.Best != nil && e.Progress.Best.Number == t.Number {
			mark = "* "
		}
		return fmt.Sprintf("%strial %d completed: %s=%.4f in %s: %s", mark, t.Number, v.sp.Objective.Metric, *t.Value, formatDuration(t.WallSeconds()), formatParams(v.sp, t.Params))
	case coordinator.TrialFailed:
		return fmt.Sprintf("  trial %d failed: %s", t.Number, firstLine(t.Error))
	case coordinator.TrialRetrying:
		return fmt.Sprintf("  trial %d attempt %d did not finish, retrying: %s", t.Number, len(t.Attempts), firstLine(e.Message))
	case coordinator.TrialSuspended:
		if v.tty {
			return ""
		}
		return fmt.Sprintf("  trial %d segment %d suspended at %g; continuing from its checkpoint", t.Number, t.Segment-1, t.Resource)
	case coordinator.TrialInterrupted:
		return fmt.Sprintf("  trial %d interrupted", t.Number)
	case coordinator.TrialRung, coordinator.TrialPruned:
		r := t.Rungs[len(t.Rungs)-1]
		verb := map[hptype.RungAction]string{hptype.RungContinue: "goes on", hptype.RungStop: "pruned", hptype.RungExploit: "exploits"}[r.Action]
		if v.tty && r.Action == hptype.RungContinue {
			return ""
		}
		return fmt.Sprintf("  trial %d %s at %s %g (%s=%.4f): %s", t.Number, verb, v.sp.Scheduler.Resource, r.Resource, v.sp.Objective.Metric, r.Value, r.Reason)
	case coordinator.StudyFinished:
		if e.Message != "" {
			return "study " + e.Study + " ended: " + e.Message
		}
	}
	return ""
}

// writeTrials prints a study's trials as a table. The RUNGS column shows
// when the study has a scheduler, PLACEMENT when it has a worker pool.
func writeTrials(w io.Writer, sp *spec.Spec, trials []*hptype.Trial) error {
	scheduled, pooled := sp.Scheduler.Type != spec.NoScheduler, sp.Pool != nil
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	head := []string{"TRIAL", "STATE", sp.Objective.Metric}
	if scheduled {
		head = append(head, "RUNGS")
	}
	if pooled {
		head = append(head, "PLACEMENT")
	}
	fmt.Fprintln(tw, strings.Join(append(head, "SEGMENTS", "ATTEMPTS", "CHECKPOINT", "WALL", "WASTED", "COST", "PARAMS"), "\t"))
	for _, t := range trials {
		row := []string{strconv.Itoa(t.Number), string(t.State), "-"}
		if t.Value != nil {
			row[2] = strconv.FormatFloat(*t.Value, 'f', 4, 64)
		}
		if scheduled {
			row = append(row, formatRungs(t.Rungs))
		}
		if pooled {
			row = append(row, formatPlacement(t.Placement))
		}
		ckpt := "-"
		if t.Checkpoint != nil {
			ckpt = formatBytes(t.Checkpoint.Bytes)
		}
		row = append(row, strconv.Itoa(t.Segments()), strconv.Itoa(len(t.Attempts)), ckpt,
			formatDuration(t.WallSeconds()), formatDuration(t.WastedSeconds()), fmt.Sprintf("$%.6f", t.CostUSD()), formatParams(sp, t.Params))
		fmt.Fprintln(tw, strings.Join(row, "\t"))
	}
	return tw.Flush()
}

// formatPlacement writes where a trial runs and why: "pool gpu
// (model_params 1.28e9 > 1e9 (pool.threshold))" or "functions (...)".
func formatPlacement(p *hptype.Placement) string {
	switch {
	case p == nil:
		return "-"
	case p.Pool != "":
		return "pool " + p.Pool + " (" + p.Reason + ")"
	}
	return "functions (" + p.Reason + ")"
}

// formatRungs writes a trial's rung decisions compactly: "1 go, 3 stop",
// "4 copy#2" for an exploit of trial 2.
func formatRungs(rs []hptype.RungDecision) string {
	if len(rs) == 0 {
		return "-"
	}
	parts := make([]string, len(rs))
	for i, r := range rs {
		switch r.Action {
		case hptype.RungContinue:
			parts[i] = fmt.Sprintf("%g go", r.Resource)
		case hptype.RungStop:
			parts[i] = fmt.Sprintf("%g stop", r.Resource)
		case hptype.RungExploit:
			parts[i] = fmt.Sprintf("%g copy#%d", r.Resource, *r.Donor)
		}
	}
	return strings.Join(parts, ", ")
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i] + " ..."
	}
	return s
}

// formatParams lists a trial's parameters in declaration order.
func formatParams(sp *spec.Spec, p hptype.Params) string {
	var parts []string
	for _, d := range sp.Params {
		v, ok := p[d.Name]
		if !ok {
			continue
		}
		parts = append(parts, d.Name+"="+formatValue(v))
	}
	return strings.Join(parts, " ")
}

func formatValue(v any) string {
	switch x := v.(type) {
	case float64:
		return fmt.Sprintf("%.4g", x)
	case string:
		return x
	}
	return fmt.Sprint(v)
}

func formatDuration(sec float64) string {
	d := time.Duration(sec * float64(time.Second))
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%.1fs", d.Seconds())
	case d < time.Hour:
		return fmt.Sprintf("%dm%02ds", int(d.Minutes()), int(d.Seconds())%60)
	}
	return fmt.Sprintf("%dh%02dm", int(d.Hours()), int(d.Minutes())%60)
}

func printSummary(w io.Writer, sp *spec.Spec, res *coordinator.Result, logDir string) {
	p := res.Progress
	fmt.Fprintln(w)
	if p.Best != nil {
		fmt.Fprintf(w, "Best trial: #%d  %s = %.6g (%s)\n", p.Best.Number, sp.Objective.Metric, *p.Best.Value, sp.Objective.Goal)
		writeParamList(w, sp, p.Best.Params)
	} else {
		fmt.Fprintln(w, "No trial completed.")
	}
	fmt.Fprintf(w, "\nStudy %s: %s\n", res.Study.Name, res.Study.State)
	fmt.Fprintf(w, "  trials     %d completed, %d failed, %d interrupted, %d queued of %d\n", p.Completed, p.Failed, p.Interrupted, p.Queued, p.MaxTrials)
	if sc := sp.Scheduler; sc.Type != spec.NoScheduler {
		full := float64(p.Created) * sc.Max
		fmt.Fprintf(w, "  scheduler  %s: %d trials pruned; trained %g %ss, %.0f%% of running all %d trials to %g\n",
			sc.Type, p.Pruned, p.ResourceTrained, sc.Resource, 100*p.ResourceTrained/max(full, 1e-12), p.Created, sc.Max)
	}
	fmt.Fprintf(w, "  wall time  %s\n", formatDuration(res.Study.ElapsedSeconds))
	fmt.Fprintf(w, "  cost       $%.6f (wasted on lost work: $%.6f; %s backend, %d MB)\n", p.CostUSD, p.WastedCostUSD, sp.Backend.Type, sp.Backend.MemoryMB)
	if pp := p.Pool; pp != nil {
		fmt.Fprintf(w, "  pool       %s: %d trials on %d workers, %.0f%% busy; busy $%.6f (in the cost above), idle $%.6f (at $%g/h)\n",
			pp.Name, pp.Trials, pp.Workers, 100*pp.Utilisation, pp.CostUSD, pp.IdleCostUSD, sp.Pool.PricePerHour)
	}
	if sp.Backend.Type != spec.Local {
		fmt.Fprintf(w, "  billed     %s, of which %s measured by hpsearch (no platform report)\n", formatDuration(float64(p.BilledMS)/1000), formatDuration(float64(p.EstimatedMS)/1000))
		fmt.Fprintf(w, "  throttled  %d invocations, retried\n", p.Throttles)
	}
	fmt.Fprintf(w, "  logs       %s\n", logDir+"/"+res.Study.Name)
	if res.Reason != "" {
		fmt.Fprintf(w, "  stopped    %s\n", res.Reason)
	}
}

// writeParamList writes a trial's parameters one a line, in declaration
// order.
func writeParamList(w io.Writer, sp *spec.Spec, params hptype.Params) {
	for _, d := range sp.Params {
		if v, ok := params[d.Name]; ok {
			fmt.Fprintf(w, "  %-20s %s\n", d.Name, formatValue(v))
		}
	}
}
