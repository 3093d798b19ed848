package lambda

import (
	"encoding/base64"
	"errors"
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// report is what the REPORT line that Lambda logs at the end of every
// invocation says, e.g.
//
//	REPORT RequestId: 8f5b…	Duration: 1021.53 ms	Billed Duration: 1022 ms	Memory Size: 1024 MB	Max Memory Used: 61 MB	Init Duration: 84.09 ms
//
// Billed Duration is what AWS charges for (GB-seconds = billed ms x memory
// size); for SnapStart functions, Billed Restore Duration is charged too.
type report struct {
	requestID string
	// duration is how long the handler ran.
	duration time.Duration
	// billedMS is Billed Duration: the handler's time (plus, for custom
	// runtimes such as the Go trainer's, the init phase), rounded up to
	// the millisecond.
	billedMS int64
	// memorySizeMB is the memory the function is configured with, 0 when
	// the line does not say.
	memorySizeMB int64
	// maxMemoryUsedMB is the peak memory of the execution environment, 0
	// when the line does not say.
	maxMemoryUsedMB int64
	// initDuration is the cold start's init phase; 0 on a warm start.
	initDuration time.Duration
	// restoreDuration and billedRestoreMS are a SnapStart function's
	// restore of its snapshot; 0 otherwise.
	restoreDuration time.Duration
	billedRestoreMS int64
}

// totalBilledMS is the milliseconds the invocation was billed for.
func (r report) totalBilledMS() int64 { return r.billedMS + r.billedRestoreMS }

// errNoReport says the log tail has no REPORT line.
var errNoReport = errors.New("no REPORT line in the log tail")

// reportPrefix starts the REPORT line.
const reportPrefix = "REPORT RequestId:"

// reportKey finds the fields of a REPORT line. Real lines separate fields
// with tabs; matching the known keys also reads lines whose tabs became
// spaces. Longer keys come first, so "Billed Duration" is not read as
// "Duration".
var reportKey = regexp.MustCompile(`(Billed Restore Duration|Restore Duration|Billed Duration|Init Duration|Max Memory Used|Memory Size|Duration|RequestId): `)

// decodeLogTail decodes the base64 log tail of an Invoke with LogType Tail.
func decodeLogTail(logResult string) (string, error) {
	b, err := base64.StdEncoding.DecodeString(logResult)
	if err != nil {
		return "", fmt.Errorf("no REPORT line: decode the log tail (X-Amz-Log-Result): %w", err)
	}
	return string(b), nil
}

// parseReport reads the last REPORT line of a log tail. Billed Duration is
// required; the other fields are read when present and must then be well
// formed. Fields it does not know (Status, Error Type, …) are ignored. It
// returns errNoReport when the tail has no REPORT line.
func parseReport(tail string) (report, error) {
	line, ok := lastReportLine(tail)
	if !ok {
		return report{}, errNoReport
	}
	var r report
	seen := map[string]bool{}
	matches := reportKey.FindAllStringSubmatchIndex(line, -1)
	for i, m := range matches {
		key := line[m[2]:m[3]]
		end := len(line)
		if i+1 < len(matches) {
			end = matches[i+1][0]
		}
		value := strings.Fields(line[m[1]:end])
		if seen[key] {
			return report{}, fmt.Errorf("REPORT line %q: %s appears twice", line, key)
		}
		seen[key] = true
		var err error
		switch key {
		case "RequestId":
			// Only logged: a line without one is still read.
			if len(value) > 0 {
				r.requestID = value[0]
			}
		case "Duration":
			r.duration, err = parseMillis(value)
		case "Billed Duration":
			r.billedMS, err = parseWhole(value, "ms", maxMS)
		case "Memory Size":
			r.memorySizeMB, err = parseWhole(value, "MB", maxMB)
		case "Max Memory Used":
			r.maxMemoryUsedMB, err = parseWhole(value, "MB", maxMB)
		case "Init Duration":
			r.initDuration, err = parseMillis(value)
		case "Restore Duration":
			r.restoreDuration, err = parseMillis(value)
		case "Billed Restore Duration":
			r.billedRestoreMS, err = parseWhole(value, "ms", maxMS)
		}
		if err != nil {
			return report{}, fmt.Errorf("REPORT line %q: %s: %w", line, key, err)
		}
	}
	if !seen["Billed Duration"] {
		return report{}, fmt.Errorf("REPORT line %q has no Billed Duration", line)
	}
	return r, nil
}

// lastReportLine returns the last line of tail that is a REPORT line.
func lastReportLine(tail string) (string, bool) {
	lines := strings.Split(tail, "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		line := strings.TrimSpace(lines[i])
		if strings.HasPrefix(line, reportPrefix) {
			return line, true
		}
	}
	return "", false
}

// Bounds on what a REPORT line may say: a day (Lambda runs at most 15
// minutes) and a terabyte (it has at most 10 GB).
const (
	maxMS = int64(24 * time.Hour / time.Millisecond)
	maxMB = int64(1 << 20)
)

// parseWhole reads "N unit" where N is a whole number up to limit.
func parseWhole(value []string, unit string, limit int64) (int64, error) {
	if len(value) < 2 || value[1] != unit {
		return 0, fmt.Errorf("want a whole number of %s, got %q", unit, strings.Join(value, " "))
	}
	n, err := strconv.ParseInt(value[0], 10, 64)
	if err != nil || n < 0 || n > limit {
		return 0, fmt.Errorf("want a whole number of %s, got %q", unit, strings.Join(value, " "))
	}
	return n, nil
}

// parseMillis reads "D ms" where D may have a fraction.
func parseMillis(value []string) (time.Duration, error) {
	if len(value) < 2 || value[1] != "ms" {
		return 0, fmt.Errorf("want milliseconds, got %q", strings.Join(value, " "))
	}
	ms, err := strconv.ParseFloat(value[0], 64)
	if err != nil || ms < 0 || math.IsNaN(ms) || ms > float64(maxMS) {
		return 0, fmt.Errorf("want milliseconds, got %q", strings.Join(value, " "))
	}
	return time.Duration(ms * float64(time.Millisecond)), nil
}
