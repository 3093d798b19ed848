package lambda

import (
	"errors"
	"strings"
	"testing"
	"time"
)

var reportCases = []struct {
	name string
	tail string
	want report
	err  string // "" for none; errNoReport's text for errNoReport
}{
	{
		name: "warm",
		tail: "START RequestId: 3604209a-e9a3-11e6-939a-754dd98c7be3 Version: $LATEST\n" +
			"END RequestId: 3604209a-e9a3-11e6-939a-754dd98c7be3\n" +
			"REPORT RequestId: 3604209a-e9a3-11e6-939a-754dd98c7be3\tDuration: 12.34 ms\tBilled Duration: 13 ms\tMemory Size: 128 MB\tMax Memory Used: 18 MB\t\n",
		want: report{requestID: "3604209a-e9a3-11e6-939a-754dd98c7be3", duration: 12340 * time.Microsecond, billedMS: 13, memorySizeMB: 128, maxMemoryUsedMB: 18},
	},
	{
		name: "cold start with init duration",
		tail: "REPORT RequestId: c3e3b6d0-5d1f-4a9e-9a52-0f1e2d3c4b5a\tDuration: 101.12 ms\tBilled Duration: 186 ms\tMemory Size: 1024 MB\tMax Memory Used: 22 MB\tInit Duration: 84.09 ms\t",
		want: report{requestID: "c3e3b6d0-5d1f-4a9e-9a52-0f1e2d3c4b5a", duration: 101120 * time.Microsecond, billedMS: 186, memorySizeMB: 1024, maxMemoryUsedMB: 22, initDuration: 84090 * time.Microsecond},
	},
	{
		name: "SnapStart restore",
		tail: "REPORT RequestId: 8d0e6c1a-2b3c-4d5e-8f90-a1b2c3d4e5f6\tDuration: 123.45 ms\tBilled Duration: 124 ms\tMemory Size: 512 MB\tMax Memory Used: 96 MB\tRestore Duration: 474.16 ms\tBilled Restore Duration: 440 ms\t",
		want: report{requestID: "8d0e6c1a-2b3c-4d5e-8f90-a1b2c3d4e5f6", duration: 123450 * time.Microsecond, billedMS: 124, memorySizeMB: 512, maxMemoryUsedMB: 96, restoreDuration: 474160 * time.Microsecond, billedRestoreMS: 440},
	},
	{
		name: "timeout status and an X-Ray line after",
		tail: "2024-05-01T10:00:03.000Z 1a2b Task timed out after 3.00 seconds\n\n" +
			"END RequestId: 1a2b\n" +
			"REPORT RequestId: 1a2b\tDuration: 3000.00 ms\tBilled Duration: 3000 ms\tMemory Size: 128 MB\tMax Memory Used: 45 MB\tInit Duration: 150.23 ms\tStatus: timeout\n" +
			"XRAY TraceId: 1-5e9f0b8c-6a3b0c1d2e3f4a5b6c7d8e9f\tSegmentId: 0a1b2c3d4e5f6a7b\tSampled: true\t\n",
		want: report{requestID: "1a2b", duration: 3 * time.Second, billedMS: 3000, memorySizeMB: 128, maxMemoryUsedMB: 45, initDuration: 150230 * time.Microsecond},
	},
	{
		name: "spaces instead of tabs",
		tail: "REPORT RequestId: 42 Init Duration: 0.50 ms Duration: 137.43 ms Billed Duration: 138 ms Memory Size: 3008 MB Max Memory Used: 3008 MB",
		want: report{requestID: "42", duration: 137430 * time.Microsecond, billedMS: 138, memorySizeMB: 3008, maxMemoryUsedMB: 3008, initDuration: 500 * time.Microsecond},
	},
	{
		name: "only billed duration",
		tail: "REPORT RequestId: 7\tBilled Duration: 1 ms",
		want: report{requestID: "7", billedMS: 1},
	},
	{
		name: "the last REPORT line counts",
		tail: "REPORT RequestId: old\tBilled Duration: 5 ms\nsome output\nREPORT RequestId: new\tBilled Duration: 9 ms\n",
		want: report{requestID: "new", billedMS: 9},
	},
	{
		name: "a REPORT inside a log line does not count",
		tail: `{"msg":"REPORT RequestId: x Billed Duration: 5 ms"}` + "\nEND RequestId: x\n",
		err:  errNoReport.Error(),
	},
	{name: "empty", tail: "", err: errNoReport.Error()},
	{name: "truncated before the REPORT line", tail: "…ning epoch 3\nepoch 3 done\n", err: errNoReport.Error()},
	{name: "no billed duration", tail: "REPORT RequestId: x\tDuration: 12.00 ms\tMemory Size: 128 MB", err: "has no Billed Duration"},
	{name: "fractional billed duration", tail: "REPORT RequestId: x\tBilled Duration: 1.5 ms", err: "Billed Duration: want a whole number of ms"},
	{name: "negative billed duration", tail: "REPORT RequestId: x\tBilled Duration: -3 ms", err: "Billed Duration: want a whole number of ms"},
	{name: "billed in seconds", tail: "REPORT RequestId: x\tBilled Duration: 3 s", err: "Billed Duration: want a whole number of ms"},
	{name: "billed a year", tail: "REPORT RequestId: x\tBilled Duration: 31536000000 ms", err: "Billed Duration: want a whole number of ms"},
	{name: "billed nothing said", tail: "REPORT RequestId: x\tBilled Duration: \tMemory Size: 128 MB", err: "Billed Duration: want a whole number of ms"},
	{name: "memory in GB", tail: "REPORT RequestId: x\tBilled Duration: 3 ms\tMax Memory Used: 1 GB", err: "Max Memory Used: want a whole number of MB"},
	{name: "bad duration", tail: "REPORT RequestId: x\tDuration: NaN ms\tBilled Duration: 3 ms", err: "Duration: want milliseconds"},
	{name: "bad init duration", tail: "REPORT RequestId: x\tBilled Duration: 3 ms\tInit Duration: fast", err: "Init Duration: want milliseconds"},
	{name: "twice billed", tail: "REPORT RequestId: x\tBilled Duration: 3 ms\tBilled Duration: 4 ms", err: "Billed Duration appears twice"},
	{name: "no request id", tail: "REPORT RequestId: \tBilled Duration: 3 ms", want: report{billedMS: 3}},
}

func TestParseReport(t *testing.T) {
	t.Parallel()
	for _, tc := range reportCases {
		got, err := parseReport(tc.tail)
		switch {
		case tc.err == errNoReport.Error():
			if !errors.Is(err, errNoReport) {
				t.Errorf("%s: error %v, want errNoReport", tc.name, err)
			}
		case tc.err != "":
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%s: error %v, want one saying %q", tc.name, err, tc.err)
			}
		case err != nil:
			t.Errorf("%s: %v", tc.name, err)
		case got != tc.want:
			t.Errorf("%s:\n got %+v\nwant %+v", tc.name, got, tc.want)
		}
	}
}

func TestReportTotalBilledCountsTheRestore(t *testing.T) {
	t.Parallel()
	if got := (report{billedMS: 124, billedRestoreMS: 440}).totalBilledMS(); got != 564 {
		t.Errorf("total billed %d ms, want 564: the restore of a SnapStart function is billed too", got)
	}
}

func TestDecodeLogTail(t *testing.T) {
	t.Parallel()
	if _, err := decodeLogTail("not base64!"); err == nil || !strings.Contains(err.Error(), "X-Amz-Log-Result") {
		t.Errorf("error %v, want one naming the header", err)
	}
	got, err := decodeLogTail("UkVQT1JUIFJlcXVlc3RJZDogeAlCaWxsZWQgRHVyYXRpb246IDMgbXM=")
	if err != nil || got != "REPORT RequestId: x\tBilled Duration: 3 ms" {
		t.Errorf("decoded %q, %v", got, err)
	}
}

// FuzzParseReport checks that any log tail either gives an error or a
// report within Lambda's bounds, and never panics.
func FuzzParseReport(f *testing.F) {
	for _, tc := range reportCases {
		f.Add(tc.tail)
	}
	f.Fuzz(func(t *testing.T, tail string) {
		r, err := parseReport(tail)
		if err != nil {
			return
		}
		if r.billedMS < 0 || r.billedMS > maxMS || r.billedRestoreMS < 0 || r.billedRestoreMS > maxMS {
			t.Errorf("billed %d + %d ms, out of bounds", r.billedMS, r.billedRestoreMS)
		}
		if r.maxMemoryUsedMB < 0 || r.maxMemoryUsedMB > maxMB || r.memorySizeMB < 0 || r.memorySizeMB > maxMB {
			t.Errorf("memory %d of %d MB, out of bounds", r.maxMemoryUsedMB, r.memorySizeMB)
		}
		for _, d := range []time.Duration{r.duration, r.initDuration, r.restoreDuration} {
			if d < 0 || d > time.Duration(maxMS)*time.Millisecond {
				t.Errorf("duration %s, out of bounds", d)
			}
		}
		if !strings.Contains(tail, reportPrefix) {
			t.Errorf("read a report from a tail without %q", reportPrefix)
		}
	})
}
