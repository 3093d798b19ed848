package queue_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/hpsearch/hpsearch/internal/queue"
)

func TestConfigDefaults(t *testing.T) {
	t.Parallel()
	got := queue.Config{}.WithDefaults()
	want := queue.Config{MaxAttempts: 3, BackoffBase: time.Second, BackoffMax: 5 * time.Minute}
	if got != want {
		t.Errorf("Config{}.WithDefaults() = %+v, want %+v", got, want)
	}
	// A base above the default max raises the default max with it.
	got = queue.Config{BackoffBase: time.Hour}.WithDefaults()
	if got.BackoffMax != time.Hour {
		t.Errorf("BackoffMax = %s, want 1h", got.BackoffMax)
	}
	if err := (queue.Config{}).Validate(); err != nil {
		t.Errorf("Config{}.Validate() = %v", err)
	}
}

func TestConfigValidate(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		cfg  queue.Config
		want string
	}{
		{"negative attempts", queue.Config{MaxAttempts: -1}, "MaxAttempts -1"},
		{"negative base", queue.Config{BackoffBase: -time.Second}, "BackoffBase -1s"},
		{"max below base", queue.Config{BackoffBase: time.Minute, BackoffMax: time.Second}, "BackoffMax 1s is less than BackoffBase 1m0s"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			err := tc.cfg.Validate()
			if !errors.Is(err, queue.ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Validate() = %v, want an ErrInvalid that says %q", err, tc.want)
			}
		})
	}
}

func TestBackoff(t *testing.T) {
	t.Parallel()
	cfg := queue.Config{BackoffBase: time.Second, BackoffMax: 10 * time.Second}.WithDefaults()
	for _, tc := range []struct {
		failures int
		full     time.Duration
	}{
		{0, time.Second},
		{1, time.Second},
		{2, 2 * time.Second},
		{3, 4 * time.Second},
		{4, 8 * time.Second},
		{5, 10 * time.Second},
		{1000, 10 * time.Second},
	} {
		for range 100 {
			got := cfg.Backoff(tc.failures)
			if got < tc.full/2 || got > tc.full {
				t.Fatalf("Backoff(%d) = %s, want in [%s, %s]", tc.failures, got, tc.full/2, tc.full)
			}
		}
	}
	// Doubling must not overflow near the largest duration.
	huge := queue.Config{BackoffBase: time.Duration(1) << 61, BackoffMax: time.Duration(1<<63 - 1)}
	if got := huge.Backoff(10); got < huge.BackoffMax/2 {
		t.Errorf("Backoff with a huge max = %s, want at least %s", got, huge.BackoffMax/2)
	}
}

func TestJobValidate(t *testing.T) {
	t.Parallel()
	if err := (queue.Job{ID: "a", Delay: time.Second}).Validate(); err != nil {
		t.Errorf("valid job: %v", err)
	}
	for _, j := range []queue.Job{{}, {ID: "a", Delay: -1}} {
		if err := j.Validate(); !errors.Is(err, queue.ErrInvalid) {
			t.Errorf("Validate(%+v) = %v, want ErrInvalid", j, err)
		}
	}
}

func TestLeaseParamsValidate(t *testing.T) {
	t.Parallel()
	if err := (queue.LeaseParams{Max: 1, Visibility: time.Second}).Validate(); err != nil {
		t.Errorf("valid params: %v", err)
	}
	for _, p := range []queue.LeaseParams{
		{Max: 0, Visibility: time.Second},
		{Max: 1},
		{Max: 1, Visibility: time.Second, Wait: -1},
	} {
		if err := p.Validate(); !errors.Is(err, queue.ErrInvalid) {
			t.Errorf("Validate(%+v) = %v, want ErrInvalid", p, err)
		}
	}
	if err := queue.ValidateVisibility(0); !errors.Is(err, queue.ErrInvalid) {
		t.Errorf("ValidateVisibility(0) = %v, want ErrInvalid", err)
	}
}

func TestLeaseLostError(t *testing.T) {
	t.Parallel()
	var err error = &queue.LeaseLostError{Tokens: []string{"t1", "t2"}}
	if !errors.Is(err, queue.ErrLeaseLost) {
		t.Error("LeaseLostError does not match ErrLeaseLost")
	}
	if got := err.Error(); !strings.HasPrefix(got, queue.ErrLeaseLost.Error()) || !strings.HasSuffix(got, ": t1, t2") {
		t.Errorf("Error() = %q", got)
	}
}
