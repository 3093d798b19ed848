package trainer

import (
	"context"
	"encoding/json"
	"fmt"
	"io"

	"github.com/hpsearch/hpsearch/internal/hptype"
)

// ServeStdio reads one SegmentRequest as JSON from r, runs it and writes the
// SegmentResult as JSON to w. An error means the request could not be read
// or the result not written; a failed segment is a result, not an error.
func ServeStdio(ctx context.Context, r io.Reader, w io.Writer) error {
	var req hptype.SegmentRequest
	dec := json.NewDecoder(r)
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		return fmt.Errorf("read segment request: %w", err)
	}
	res := Run(ctx, req)
	if err := json.NewEncoder(w).Encode(res); err != nil {
		return fmt.Errorf("write segment result: %w", err)
	}
	return nil
}
