package testenv

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"
)

// Receiver is a merchant's webhook endpoint on loopback (test mode's
// webhook URLs may be loopback): it keeps every request and answers with
// the status it is set to.
type Receiver struct {
	*httptest.Server

	mu       sync.Mutex
	got      []Request
	status   int
	holdKind string
	held     chan Request
	arrived  chan struct{}
}

// Request is one delivery as the receiver saw it.
type Request struct {
	At     time.Time
	Header http.Header
	Body   []byte
	// EventID and Event are the body's id and event, when it has them.
	EventID string
	Event   string
	// Acked: the receiver answered 2xx to a sender still connected; a
	// held delivery (HoldFirst) never is.
	Acked bool
}

// NewReceiver starts a receiver answering status (SetStatus changes it);
// it stops when the test ends.
func NewReceiver(tb testing.TB, status int) *Receiver {
	tb.Helper()
	r := &Receiver{status: status, arrived: make(chan struct{}, 1)}
	r.Server = httptest.NewServer(http.HandlerFunc(r.serve))
	tb.Cleanup(r.Close)
	return r
}

// SetStatus makes the receiver answer status from now on; a 3xx answer
// points elsewhere (Location), so a sender that follows redirects would be
// seen to.
func (r *Receiver) SetStatus(status int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.status = status
}

// HoldFirst makes the receiver hold the first delivery of event without
// answering until its sender goes away (a test kills the process sending
// it); the delivery is sent on the returned channel when it arrives.
func (r *Receiver) HoldFirst(event string) <-chan Request {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.holdKind = event
	r.held = make(chan Request, 1)
	return r.held
}

// Requests returns every request so far, in arrival order.
func (r *Receiver) Requests() []Request {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Request(nil), r.got...)
}

// Arrived is signalled after each request is recorded (one pending signal
// at most), for a test that waits for deliveries without polling.
func (r *Receiver) Arrived() <-chan struct{} { return r.arrived }

func (r *Receiver) serve(w http.ResponseWriter, req *http.Request) {
	body, err := io.ReadAll(req.Body)
	if err != nil {
		http.Error(w, "bad body", http.StatusBadRequest)
		return
	}
	var env struct {
		ID    string `json:"id"`
		Event string `json:"event"`
	}
	_ = json.Unmarshal(body, &env)
	rec := Request{At: time.Now(), Header: req.Header.Clone(), Body: body, EventID: env.ID, Event: env.Event}

	r.mu.Lock()
	status := r.status
	hold := r.holdKind != "" && r.holdKind == env.Event
	held := r.held
	if hold {
		r.holdKind = ""
	}
	r.mu.Unlock()
	if hold {
		held <- rec
		// The body has been read, so the server notices the sender's
		// connection closing and ends the request's context.
		select {
		case <-req.Context().Done():
		case <-time.After(time.Minute):
		}
		r.record(rec)
		return
	}
	// Recorded before the answer, so a sender that has its answer finds
	// the request here.
	rec.Acked = status >= 200 && status < 300
	r.record(rec)
	if status >= 300 && status < 400 {
		w.Header().Set("Location", "http://127.0.0.1:1/elsewhere")
	}
	w.WriteHeader(status)
}

func (r *Receiver) record(rec Request) {
	r.mu.Lock()
	r.got = append(r.got, rec)
	r.mu.Unlock()
	select {
	case r.arrived <- struct{}{}:
	default:
	}
}
