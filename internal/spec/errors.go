package spec

import (
	"fmt"
	"sort"
	"strings"
)

// Error is one problem in a space file.
type Error struct {
	File      string
	Line, Col int
	Msg       string
}

// Error formats the problem as "file:line:col: msg".
func (e *Error) Error() string {
	return fmt.Sprintf("%s:%d:%d: %s", e.File, e.Line, e.Col, e.Msg)
}

// Errors is every problem found in a space file, in file order.
type Errors []*Error

// Error formats the problems one per line.
func (es Errors) Error() string {
	lines := make([]string, len(es))
	for i, e := range es {
		lines[i] = e.Error()
	}
	return strings.Join(lines, "\n")
}

// pos is a 1-based line and column in a space file.
type pos struct{ line, col int }

// fileStart is where problems with the file as a whole are reported.
var fileStart = pos{1, 1}

// collector gathers the problems of one file.
type collector struct {
	file string
	errs Errors
}

func (c *collector) errorf(p pos, format string, args ...any) {
	c.errs = append(c.errs, &Error{File: c.file, Line: p.line, Col: p.col, Msg: fmt.Sprintf(format, args...)})
}

// err returns the problems in file order, or nil if there are none.
func (c *collector) err() error {
	if len(c.errs) == 0 {
		return nil
	}
	sort.SliceStable(c.errs, func(i, j int) bool {
		a, b := c.errs[i], c.errs[j]
		if a.Line != b.Line {
			return a.Line < b.Line
		}
		return a.Col < b.Col
	})
	return c.errs
}
