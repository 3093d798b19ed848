package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"unicode/utf8"

	"github.com/hpsearch/hpsearch/client"
	"github.com/hpsearch/hpsearch/internal/spec"
)

// apiError is an error response: an HTTP status and the body's error.
type apiError struct {
	status int
	body   client.Error
}

func (e *apiError) Error() string { return e.body.Message }

func errorf(status int, code, format string, args ...any) *apiError {
	return &apiError{status: status, body: client.Error{Code: code, Message: fmt.Sprintf(format, args...)}}
}

// invalid is a 400 that names the field at fault.
func invalid(field, format string, args ...any) *apiError {
	e := errorf(http.StatusBadRequest, client.CodeInvalid, format, args...)
	e.body.Field = field
	return e
}

// spaceError is the 400 of a space document with problems: every problem
// with its line and column, as the CLI prints them.
func spaceError(errs spec.Errors) *apiError {
	e := &apiError{status: http.StatusBadRequest, body: client.Error{Code: client.CodeInvalidSpace, Message: errs.Error()}}
	for _, p := range errs {
		e.body.Problems = append(e.body.Problems, client.Problem{File: p.File, Line: p.Line, Column: p.Col, Message: p.Msg})
	}
	if len(errs) > 0 {
		e.body.Line, e.body.Column = errs[0].Line, errs[0].Col
	}
	return e
}

// writeJSON writes v as the JSON body of a response with status.
func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}

func writeError(w http.ResponseWriter, e *apiError) {
	if e.status == http.StatusUnauthorized {
		w.Header().Set("WWW-Authenticate", `Bearer realm="hpsearch"`)
	}
	writeJSON(w, e.status, client.ErrorBody{Error: &e.body})
}

// readBody reads a request body up to the server's limit.
func readBody(r *http.Request) ([]byte, error) {
	data, err := io.ReadAll(r.Body)
	var tooLarge *http.MaxBytesError
	if errors.As(err, &tooLarge) {
		return nil, errorf(http.StatusRequestEntityTooLarge, client.CodeTooLarge, "the request body is larger than the limit of %d bytes", tooLarge.Limit)
	}
	if err != nil {
		return nil, invalid("body", "read the request body: %v", err)
	}
	return data, nil
}

// decodeJSON decodes a JSON request body into v, refusing unknown fields;
// a problem is reported with the field at fault and its line and column.
func decodeJSON(r *http.Request, v any) error {
	data, err := readBody(r)
	if err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	err = dec.Decode(v)
	if err == nil && dec.More() {
		err = errors.New("unexpected data after the JSON object")
	}
	if err == nil {
		return nil
	}
	var syntax *json.SyntaxError
	var typ *json.UnmarshalTypeError
	var e *apiError
	switch {
	case errors.Is(err, io.EOF):
		return invalid("body", "the request body is empty; send a JSON object")
	case errors.Is(err, io.ErrUnexpectedEOF):
		e = invalid("body", "the body ends in the middle of its JSON")
		e.body.Line, e.body.Column = lineCol(data, int64(len(data)))
	case errors.As(err, &syntax):
		e = invalid("body", "the body is not valid JSON: %v", syntax)
		e.body.Line, e.body.Column = lineCol(data, syntax.Offset)
	case errors.As(err, &typ):
		field := typ.Field
		if field == "" {
			field = "body"
		}
		e = invalid(field, "%s must be %s, got JSON %s", field, describeType(typ.Type.Kind().String()), typ.Value)
		e.body.Line, e.body.Column = lineCol(data, valueStart(data, typ.Offset))
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		field := strings.Trim(strings.TrimPrefix(err.Error(), "json: unknown field "), `"`)
		e = invalid(field, "unknown field %q", field)
	default:
		e = invalid("body", "%v", err)
	}
	return e
}

func describeType(kind string) string {
	switch kind {
	case "float64", "int", "int64":
		return "a number"
	case "slice":
		return "an array"
	case "struct", "map", "ptr":
		return "an object"
	}
	return "a " + kind
}

// valueStart finds where the JSON value that ends at end starts: the
// decoder reports type errors after the value.
func valueStart(data []byte, end int64) int64 {
	i := min(end, int64(len(data))) - 1
	for i >= 0 && strings.ContainsRune(" \t\r\n", rune(data[i])) {
		i--
	}
	if i < 0 {
		return 0
	}
	switch data[i] {
	case '{', '[':
		// An object or array is reported at its start.
		return i
	case '"':
		for i--; i >= 0 && (data[i] != '"' || backslashes(data, i)%2 == 1); i-- {
		}
		return max(i, 0)
	case '}', ']':
		depth := 0
		for ; i >= 0; i-- {
			switch data[i] {
			case '}', ']':
				depth++
			case '{', '[':
				depth--
			}
			if depth == 0 {
				return i
			}
		}
		return 0
	}
	for i >= 0 && !strings.ContainsRune(" \t\r\n:,[{", rune(data[i])) {
		i--
	}
	return i + 1
}

// backslashes counts the backslashes right before data[i].
func backslashes(data []byte, i int64) int {
	n := 0
	for j := i - 1; j >= 0 && data[j] == '\\'; j-- {
		n++
	}
	return n
}

// lineCol turns a byte offset into a 1-based line and column (in runes).
func lineCol(data []byte, offset int64) (int, int) {
	if offset > int64(len(data)) {
		offset = int64(len(data))
	}
	before := data[:offset]
	line := bytes.Count(before, []byte("\n")) + 1
	start := bytes.LastIndexByte(before, '\n') + 1
	return line, utf8.RuneCount(before[start:]) + 1
}
