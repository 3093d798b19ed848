package command

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/hpsearch/hpsearch/internal/hptype"
)

// maxLine bounds how much of one stdout line is held in memory. A longer
// line cannot be a metric report; it goes to the log in pieces.
const maxLine = 16 << 20

// metricWriter receives the command's stdout, splits it into lines, reports
// the metric lines and passes the others to the log.
type metricWriter struct {
	report  func(hptype.Metric)
	log     io.Writer
	buf     []byte // the current line, without its newline
	long    bool   // the current line outgrew maxLine and is going to the log
	reports int    // metric report lines so far
}

func (w *metricWriter) Write(p []byte) (int, error) {
	n := len(p)
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		if i < 0 {
			w.buf = append(w.buf, p...)
			if len(w.buf) > maxLine {
				w.long = true
				w.log.Write(w.buf)
				w.buf = w.buf[:0]
			}
			break
		}
		w.buf = append(w.buf, p[:i+1]...)
		w.line()
		p = p[i+1:]
	}
	return n, nil
}

// flush handles a last line that has no newline.
func (w *metricWriter) flush() {
	if len(w.buf) > 0 {
		w.buf = append(w.buf, '\n')
		w.line()
	}
}

// line handles w.buf, which holds one line and its newline.
func (w *metricWriter) line() {
	defer func() { w.buf, w.long = w.buf[:0], false }()
	if !w.long {
		if ms := parseReport(w.buf, w.reports+1); ms != nil {
			w.reports++
			for _, m := range ms {
				w.report(m)
			}
			return
		}
	}
	w.log.Write(w.buf)
}

// parseReport returns the metrics of a report line, or nil when line is not
// one; implicitStep is the Step to use when the line gives none.
func parseReport(line []byte, implicitStep int) []hptype.Metric {
	line = bytes.TrimSpace(line)
	if len(line) == 0 || line[0] != '{' {
		return nil
	}
	var fields map[string]json.RawMessage
	if json.Unmarshal(line, &fields) != nil {
		return nil
	}
	step, ok := number(fields["step"])
	delete(fields, "step")
	if !ok {
		if step, ok = number(fields["epoch"]); ok {
			delete(fields, "epoch")
		} else {
			step = float64(implicitStep)
		}
	}
	var ms []hptype.Metric
	for _, name := range slices.Sorted(maps.Keys(fields)) {
		if v, ok := number(fields[name]); ok {
			ms = append(ms, hptype.Metric{Step: step, Name: name, Value: v})
		}
	}
	return ms
}

// number reads a JSON value that is a finite number.
func number(raw json.RawMessage) (float64, bool) {
	if len(raw) == 0 || raw[0] != '-' && (raw[0] < '0' || raw[0] > '9') {
		return 0, false
	}
	v, err := strconv.ParseFloat(string(raw), 64)
	if err != nil || math.IsInf(v, 0) {
		return 0, false
	}
	return v, true
}

// Sizes of the stderr tail kept for error messages.
const (
	tailLines   = 20
	tailLineMax = 500 // bytes; longer lines keep their end
)

// tail keeps the last lines of the command's stderr for error messages. A
// carriage return starts the line over, as on a terminal, so that progress
// bars do not crowd out the lines that matter.
type tail struct {
	lines   []string
	partial []byte
}

func (t *tail) Write(p []byte) (int, error) {
	n := len(p)
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		if i < 0 {
			t.add(p)
			break
		}
		t.add(p[:i])
		t.push()
		p = p[i+1:]
	}
	return n, nil
}

// add appends to the current line, keeping only what could be shown.
func (t *tail) add(p []byte) {
	t.partial = append(t.partial, p...)
	if len(t.partial) > 4*tailLineMax {
		t.partial = append(t.partial[:0], t.partial[len(t.partial)-2*tailLineMax:]...)
	}
}

// push ends the current line.
func (t *tail) push() {
	line := bytes.TrimSuffix(t.partial, []byte("\r"))
	if i := bytes.LastIndexByte(line, '\r'); i >= 0 {
		line = line[i+1:]
	}
	s := string(line)
	if len(s) > tailLineMax {
		s = "…" + strings.ToValidUTF8(s[len(s)-tailLineMax:], "")
	}
	if len(t.lines) == tailLines {
		t.lines = append(t.lines[:0], t.lines[1:]...)
	}
	t.lines = append(t.lines, s)
	t.partial = t.partial[:0]
}

// describe returns the tail for the end of an error message.
func (t *tail) describe() string {
	if len(t.partial) > 0 {
		t.push()
	}
	if len(t.lines) == 0 {
		return "; it wrote nothing to stderr"
	}
	return fmt.Sprintf("; the last %d lines of its stderr:\n\t%s", len(t.lines), strings.Join(t.lines, "\n\t"))
}
