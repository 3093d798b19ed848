package lambda

import (
	"testing"
	"time"
)

func TestBackoffWait(t *testing.T) {
	t.Parallel()
	b := Backoff{Base: 200 * time.Millisecond, Max: 20 * time.Second}
	// highest draws the top of the range it is given; lowest its bottom.
	highest := func(n int64) int64 { return n - 1 }
	lowest := func(int64) int64 { return 0 }
	for _, tc := range []struct {
		name       string
		retry      int
		retryAfter time.Duration
		rand       func(int64) int64
		want       time.Duration
	}{
		{"first retry, top", 0, 0, highest, 200 * time.Millisecond},
		{"first retry, bottom", 0, 0, lowest, 0},
		{"doubles", 3, 0, highest, 1600 * time.Millisecond},
		{"capped at Max", 7, 0, highest, 20 * time.Second},
		{"no overflow on the 1000th retry", 1000, 0, highest, 20 * time.Second},
		{"Retry-After, bottom", 5, 3 * time.Second, lowest, 3 * time.Second},
		{"Retry-After plus at most Base of jitter", 5, 3 * time.Second, highest, 3*time.Second + 200*time.Millisecond},
		{"Retry-After over Max is honoured", 0, time.Minute, lowest, time.Minute},
	} {
		if got := b.wait(tc.retry, tc.retryAfter, tc.rand); got != tc.want {
			t.Errorf("%s: wait %s, want %s", tc.name, got, tc.want)
		}
	}
}

func TestParseRetryAfter(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]time.Duration{
		"":                              0,
		"3":                             3 * time.Second,
		" 1 ":                           time.Second,
		"0.5":                           500 * time.Millisecond,
		"0":                             0,
		"-2":                            0,
		"soon":                          0,
		"NaN":                           0,
		"86400":                         0, // over an hour: noise
		"Wed, 21 Oct 2015 07:28:00 GMT": 0, // a date: not what Lambda sends
	} {
		if got := parseRetryAfter(in); got != want {
			t.Errorf("parseRetryAfter(%q) = %s, want %s", in, got, want)
		}
	}
}
