package client

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// EventStream reads a study's events as the server sends them
// (Server-Sent Events).
type EventStream struct {
	body io.ReadCloser
	sc   *bufio.Scanner
	// lastID is the ID of the newest event read.
	lastID int64
}

// Events opens the stream of a study's events that come after the event
// lastEventID (0: every event the server keeps). The server ends the
// stream after the study_finished event, and answers a study that is not
// running, with no newer event, with an empty stream.
func (c *Client) Events(ctx context.Context, study string, lastEventID int64) (*EventStream, error) {
	req, err := c.request(ctx, http.MethodGet, studyPath(study, "/events"), nil, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "text/event-stream")
	if lastEventID > 0 {
		req.Header.Set("Last-Event-ID", strconv.FormatInt(lastEventID, 10))
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode/100 != 2 {
		defer resp.Body.Close()
		return nil, readError(resp)
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	return &EventStream{body: resp.Body, sc: sc, lastID: lastEventID}, nil
}

// Next returns the next event. It returns io.EOF when the server ended the
// stream.
func (s *EventStream) Next() (*Event, error) {
	var data strings.Builder
	var id string
	for s.sc.Scan() {
		line := s.sc.Text()
		if line == "" {
			if data.Len() == 0 {
				continue
			}
			var e Event
			if err := json.Unmarshal([]byte(data.String()), &e); err != nil {
				return nil, fmt.Errorf("decode event %s: %w", id, err)
			}
			if id != "" {
				n, err := strconv.ParseInt(id, 10, 64)
				if err != nil {
					return nil, fmt.Errorf("event ID %q: %w", id, err)
				}
				e.ID, s.lastID = n, n
			}
			return &e, nil
		}
		field, value, _ := strings.Cut(line, ":")
		value = strings.TrimPrefix(value, " ")
		switch field {
		case "data":
			if data.Len() > 0 {
				data.WriteByte('\n')
			}
			data.WriteString(value)
		case "id":
			id = value
		}
	}
	if err := s.sc.Err(); err != nil {
		return nil, err
	}
	return nil, io.EOF
}

// LastID is the ID of the newest event read, or the ID the stream was
// opened after: open the stream again after it to resume.
func (s *EventStream) LastID() int64 { return s.lastID }

// Close ends the stream.
func (s *EventStream) Close() error { return s.body.Close() }

// Follow calls fn with each of a study's events after lastEventID until
// the study finishes (fn has then seen its study_finished event), fn
// returns an error, or ctx ends. When the connection breaks it reconnects
// with the ID of the last event seen, so no event is missed or repeated;
// an error the server answers with ends it.
func (c *Client) Follow(ctx context.Context, study string, lastEventID int64, fn func(*Event) error) error {
	backoff := 100 * time.Millisecond
	for {
		s, err := c.Events(ctx, study, lastEventID)
		var apiErr *Error
		switch {
		case errors.As(err, &apiErr) || ctx.Err() != nil:
			return err
		case err == nil:
			done, ferr := follow(s, fn)
			s.Close()
			lastEventID = s.LastID()
			if done || ferr != nil {
				return ferr
			}
			backoff = 100 * time.Millisecond
		}
		select {
		case <-ctx.Done():
			return context.Cause(ctx)
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 5*time.Second)
	}
}

// follow hands a stream's events to fn; done says the stream ended with the
// study's end, or with nothing left to send.
func follow(s *EventStream, fn func(*Event) error) (done bool, err error) {
	for {
		e, err := s.Next()
		if errors.Is(err, io.EOF) {
			// The server ends a stream only when the study is not running.
			return true, nil
		}
		if err != nil {
			return false, nil
		}
		if err := fn(e); err != nil {
			return true, err
		}
		if e.Kind == EventStudyFinished {
			return true, nil
		}
	}
}
