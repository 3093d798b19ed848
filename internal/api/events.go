package api

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hpsearch/hpsearch/client"
	"github.com/hpsearch/hpsearch/internal/hptype"
)

// eventLog keeps a study's newest events in memory for its streams.
type eventLog struct {
	mu     sync.Mutex
	max    int
	events []logged // oldest first
	// dropped is the ID of the newest event dropped to stay under max.
	dropped int64
	// changed is closed, and replaced, when an event is added.
	changed chan struct{}
	// streamed counts, per trial, the metrics already sent in events.
	streamed map[int]int
}

// logged is an event as it was published.
type logged struct {
	id   int64
	kind client.EventKind
	// data is the event in JSON, encoded when it was published: the
	// trials it holds share parts with the coordinator's, which go on
	// changing.
	data []byte
}

func (s *Server) eventLog(studyID string) *eventLog {
	s.mu.Lock()
	defer s.mu.Unlock()
	l, ok := s.logs[studyID]
	if !ok {
		l = &eventLog{max: s.cfg.EventsPerStudy, changed: make(chan struct{}), streamed: map[int]int{}}
		s.logs[studyID] = l
	}
	return l
}

// publish gives e the next ID and adds it to its study's log.
func (s *Server) publish(e client.Event) {
	l := s.eventLog(e.StudyID)
	l.mu.Lock()
	defer l.mu.Unlock()
	e.ID = s.nextID.Add(1)
	data, err := json.Marshal(e)
	if err != nil {
		s.cfg.Logger.Error("encode an event", "study", e.Study, "kind", e.Kind, "error", err)
		return
	}
	l.events = append(l.events, logged{id: e.ID, kind: e.Kind, data: data})
	if over := len(l.events) - l.max; over > 0 {
		l.dropped = l.events[over-1].id
		l.events = append(l.events[:0:0], l.events[over:]...)
	}
	close(l.changed)
	l.changed = make(chan struct{})
}

// newMetrics returns the metrics of a trial not yet sent in an event and
// marks them sent.
func (l *eventLog) newMetrics(trial int, all []hptype.Metric) []hptype.Metric {
	l.mu.Lock()
	defer l.mu.Unlock()
	from := l.streamed[trial]
	if from > len(all) {
		from = 0
	}
	l.streamed[trial] = len(all)
	if from == len(all) {
		return nil
	}
	return append([]hptype.Metric(nil), all[from:]...)
}

// after returns the events after id, whether events after id were dropped
// (or came before this process), and a channel closed at the next event.
func (l *eventLog) after(id, idBase int64) (events []logged, missed bool, changed <-chan struct{}) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for i, e := range l.events {
		if e.id > id {
			events = append(events, l.events[i:]...)
			break
		}
	}
	missed = id > 0 && (id < idBase || id < l.dropped)
	return events, missed, l.changed
}

// last is the ID of the newest event, or 0.
func (l *eventLog) last() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.events) == 0 {
		return 0
	}
	return l.events[len(l.events)-1].id
}

// live reports whether a study may still have events: its coordinator
// runs, or it is an ask/tell study that accepts asks.
func (s *Server) live(st *hptype.Study, mode client.Mode) bool {
	if mode == client.ModeAskTell {
		return st.State == hptype.StudyRunning
	}
	return s.active(st.ID) != nil
}

// events streams a study's events as Server-Sent Events: each is an
// "id:" line and a "data:" line of JSON. It starts after the
// Last-Event-ID header (or the last_event_id parameter) and ends after the
// study_finished event. A study that is not running gets the events there
// are after that ID, and the stream ends; with none, 204 No Content, which
// tells EventSource clients to stop.
func (s *Server) events(w http.ResponseWriter, r *http.Request) error {
	lastID, err := lastEventID(r)
	if err != nil {
		return err
	}
	// Changes of a study's state are published under its lock, so that a
	// study seen not live here has published its study_finished event.
	st, sp, unlock, err := s.lockedStudy(r.Context(), r.PathValue("study"))
	if err != nil {
		return err
	}
	// Liveness first: a run publishes its study_finished event before it
	// stops counting as live.
	live := s.live(st, modeOf(sp))
	log := s.eventLog(st.ID)
	events, missed, changed := log.after(lastID, s.idBase)
	unlock()
	if len(events) == 0 && !missed && !live {
		w.WriteHeader(http.StatusNoContent)
		return nil
	}
	rc := http.NewResponseController(w)
	// A stream lasts as long as its study: the server's write timeout is
	// for ordinary requests.
	if err := rc.SetWriteDeadline(time.Time{}); err != nil {
		return fmt.Errorf("clear the write deadline of an event stream: %w", err)
	}
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	if missed {
		data, err := json.Marshal(client.Event{Time: time.Now().UTC(), Kind: client.EventResync, Study: st.Name, StudyID: st.ID,
			Message: fmt.Sprintf("events after %d are no longer kept (the server restarted, or keeps only the newest %d); read the study again", lastID, s.cfg.EventsPerStudy)})
		if err != nil {
			return err
		}
		writeEvent(w, logged{kind: client.EventResync, data: data})
	}
	keepAlive := time.NewTicker(s.cfg.KeepAlive)
	defer keepAlive.Stop()
	for {
		for _, e := range events {
			writeEvent(w, e)
			lastID = e.id
		}
		if err := rc.Flush(); err != nil {
			return nil
		}
		if n := len(events); n > 0 && events[n-1].kind == client.EventStudyFinished {
			return nil
		}
		if !live {
			return nil
		}
		select {
		case <-r.Context().Done():
			return nil
		case <-s.closed:
			return nil
		case <-keepAlive.C:
			fmt.Fprint(w, ": keep-alive\n\n")
		case <-changed:
		}
		events, _, changed = log.after(lastID, s.idBase)
	}
}

// writeEvent writes one event of a stream: its ID, if it has one, and its
// data.
func writeEvent(w http.ResponseWriter, e logged) {
	if e.id != 0 {
		fmt.Fprintf(w, "id: %d\n", e.id)
	}
	fmt.Fprintf(w, "data: %s\n\n", e.data)
}

// lastEventID reads where a stream resumes: the Last-Event-ID header that
// EventSource sends when it reconnects, or the last_event_id parameter.
func lastEventID(r *http.Request) (int64, error) {
	field, v := "Last-Event-ID", r.Header.Get("Last-Event-ID")
	if q := r.URL.Query().Get("last_event_id"); q != "" {
		field, v = "last_event_id", q
	}
	v = strings.TrimSpace(v)
	if v == "" {
		return 0, nil
	}
	id, err := strconv.ParseInt(v, 10, 64)
	if err != nil || id < 0 {
		return 0, invalid(field, "%s %q is not an event ID (a number)", field, v)
	}
	return id, nil
}
