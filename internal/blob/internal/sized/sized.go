// Package sized checks the readers given to blob.Store.Put: they must hold
// exactly the size the caller declared, and reading them stops once the
// caller's context is done.
package sized

import (
	"context"
	"errors"
	"fmt"
	"io"
)

// ErrTooLong is returned by a Reader whose source holds more bytes than
// the declared size.
var ErrTooLong = errors.New("the reader holds more bytes than the size given to Put")

// Reader passes through exactly size bytes of a source reader. A source
// that ends before size fails with an error wrapping io.ErrUnexpectedEOF;
// one that holds more fails with ErrTooLong; a Read after the context is
// done fails with its error.
type Reader struct {
	ctx  context.Context
	r    io.Reader
	size int64
	left int64
}

// NewReader returns a Reader of size bytes from r, bound to ctx.
func NewReader(ctx context.Context, r io.Reader, size int64) *Reader {
	return &Reader{ctx: ctx, r: r, size: size, left: size}
}

// Read implements io.Reader.
func (s *Reader) Read(p []byte) (int, error) {
	if err := s.ctx.Err(); err != nil {
		return 0, err
	}
	if s.left == 0 {
		return 0, s.checkEnd()
	}
	if int64(len(p)) > s.left {
		p = p[:s.left]
	}
	n, err := s.r.Read(p)
	s.left -= int64(n)
	switch {
	case err == io.EOF && s.left > 0:
		return n, fmt.Errorf("the reader ended after %d of the %d bytes given as size: %w",
			s.size-s.left, s.size, io.ErrUnexpectedEOF)
	case err == io.EOF:
		// The source ended exactly at size: nothing more to check.
		s.r = eofReader{}
	}
	return n, err
}

// checkEnd is called once size bytes have been read: the source must be
// at its end.
func (s *Reader) checkEnd() error {
	var one [1]byte
	n, err := io.ReadFull(s.r, one[:])
	switch {
	case n > 0:
		return fmt.Errorf("%w (%d bytes)", ErrTooLong, s.size)
	case err == io.EOF:
		s.r = eofReader{}
		return io.EOF
	default:
		return err
	}
}

type eofReader struct{}

func (eofReader) Read([]byte) (int, error) { return 0, io.EOF }

// ReadAll reads exactly size bytes from r into a new slice: the whole
// object, for uploads that need a seekable body. Its errors are those of
// Reader.
func ReadAll(ctx context.Context, r io.Reader, size int64) ([]byte, error) {
	s := NewReader(ctx, r, size)
	buf := make([]byte, size)
	// Reader reports an early end itself, so io.ReadFull never sees io.EOF.
	if _, err := io.ReadFull(s, buf); err != nil {
		return nil, err
	}
	if err := s.checkEnd(); err != io.EOF {
		return nil, err
	}
	return buf, nil
}
