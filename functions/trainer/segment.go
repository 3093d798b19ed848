package trainer

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/hpsearch/hpsearch/internal/checkpoint"
	"github.com/hpsearch/hpsearch/internal/hptype"
)

// segment is the state of one run of the trainer core.
type segment struct {
	req   hptype.SegmentRequest
	res   hptype.SegmentResult
	store *checkpoint.Store // nil without a checkpoint policy
	log   io.Writer
	// seq numbers the checkpoints this attempt writes.
	seq int
	// saved is when the last checkpoint was written (or the segment began).
	saved time.Time
	// savedMetrics counts the metrics covered by the last checkpoint.
	savedMetrics int
}

func (s *segment) logWriter() io.Writer {
	if s.log == nil {
		return io.Discard
	}
	return s.log
}

// report records a metric the workload reported.
func (s *segment) report(m hptype.Metric) {
	s.res.Metrics = append(s.res.Metrics, m)
	s.res.ResourceReached = max(s.res.ResourceReached, m.Step)
}

// restore loads the trial's newest valid checkpoint into dst. It reports
// whether there was one; corrupt checkpoints it skipped become warnings.
func (s *segment) restore(ctx context.Context, dst checkpoint.Destination) (*checkpoint.Manifest, error) {
	s.saved = time.Now()
	if s.store == nil {
		return nil, nil
	}
	m, problems, err := s.store.Latest(ctx, s.req.Checkpoint.Prefix, dst)
	for _, p := range problems {
		w := "skipped a damaged checkpoint: " + p.Error()
		s.res.Warnings = append(s.res.Warnings, w)
		fmt.Fprintln(s.logWriter(), "hpsearch: "+w)
	}
	switch {
	case errors.Is(err, checkpoint.ErrNoCheckpoint):
		return nil, nil
	case err != nil:
		return nil, retryable{fmt.Errorf("restore the trial's checkpoint: %w", err)}
	}
	s.res.ResumedFrom = m.Ref()
	s.res.ResourceReached = m.Resource
	fmt.Fprintf(s.logWriter(), "hpsearch: segment %d attempt %d resumes from checkpoint %s at %s %g\n", s.req.Segment, s.req.Attempt, m.ID, s.unit(), m.Resource)
	return m, nil
}

func (s *segment) unit() string {
	if s.req.Resource.Unit == "" {
		return "step"
	}
	return s.req.Resource.Unit
}

// saveDue reports whether Checkpoint.Every has passed since the last save.
func (s *segment) saveDue() bool {
	cp := s.req.Checkpoint
	return cp != nil && cp.Every > 0 && time.Since(s.saved) >= cp.Every.Std()
}

// mustStop reports whether there is no time left for another step of the
// given length before the deadline less the grace period.
func (s *segment) mustStop(step time.Duration) bool {
	if s.req.Deadline.IsZero() {
		return false
	}
	var grace time.Duration
	if cp := s.req.Checkpoint; cp != nil {
		grace = cp.Grace.Std()
	}
	return time.Now().Add(step + grace).After(s.req.Deadline)
}

// save writes a checkpoint of the given shards at resource, then trims the
// trial's old checkpoints. It runs even when ctx is done (a stop is when a
// checkpoint matters most), bounded by the segment's deadline.
func (s *segment) save(ctx context.Context, resource float64, shards []checkpoint.Shard) error {
	if s.store == nil {
		return nil
	}
	wctx := context.WithoutCancel(ctx)
	if !s.req.Deadline.IsZero() {
		var cancel context.CancelFunc
		wctx, cancel = context.WithDeadline(wctx, s.req.Deadline)
		defer cancel()
	}
	cp := s.req.Checkpoint
	m, err := s.store.Save(wctx, cp.Prefix, checkpoint.Manifest{
		Study:    s.req.Study,
		Trial:    s.req.Trial,
		ID:       checkpoint.ID{Segment: s.req.Segment, Attempt: s.req.Attempt, Seq: s.seq},
		Resource: resource,
		Metrics:  s.res.Metrics,
	}, shards)
	if err != nil {
		return retryable{fmt.Errorf("write checkpoint at %s %g: %w", s.unit(), resource, err)}
	}
	s.seq++
	s.saved = time.Now()
	s.savedMetrics = len(s.res.Metrics)
	s.res.Checkpoint = m.Ref()
	if err := s.store.Retain(wctx, cp.Prefix, cp.KeepLast); err != nil {
		fmt.Fprintf(s.logWriter(), "hpsearch: could not remove old checkpoints: %v\n", err)
	}
	return nil
}
