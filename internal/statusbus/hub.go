package statusbus

import (
	"context"
	"sync"
)

// subscriberBuffer is the messages a subscriber may have waiting before it
// misses the next one (a session has a handful of statuses, far below it).
const subscriberBuffer = 32

// hub fans messages out to the local subscribers of each topic and key,
// never blocking the one who delivers.
type hub struct {
	mu   sync.Mutex
	subs map[address]map[chan string]struct{}
}

// address is where a subscriber listens.
type address struct {
	topic Topic
	key   string
}

func newHub() *hub {
	return &hub{subs: map[address]map[chan string]struct{}{}}
}

func (h *hub) add(at address) chan string {
	ch := make(chan string, subscriberBuffer)
	h.mu.Lock()
	defer h.mu.Unlock()
	m := h.subs[at]
	if m == nil {
		m = map[chan string]struct{}{}
		h.subs[at] = m
	}
	m[ch] = struct{}{}
	return ch
}

// remove unregisters and closes ch.
func (h *hub) remove(at address, ch chan string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	m := h.subs[at]
	if _, ok := m[ch]; !ok {
		return
	}
	delete(m, ch)
	if len(m) == 0 {
		delete(h.subs, at)
	}
	close(ch)
}

func (h *hub) deliver(topic Topic, key, message string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for ch := range h.subs[address{topic, key}] {
		select {
		case ch <- message:
		default:
		}
	}
}

// resyncAll tells every subscriber that messages may have been missed.
func (h *hub) resyncAll() {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, m := range h.subs {
		for ch := range m {
			select {
			case ch <- Resync:
			default:
			}
		}
	}
}

// subscribe registers a subscriber until ctx ends; done, when not nil, runs
// after it is removed.
func (h *hub) subscribe(ctx context.Context, topic Topic, key string, done func()) <-chan string {
	at := address{topic, key}
	ch := h.add(at)
	go func() {
		<-ctx.Done()
		h.remove(at, ch)
		if done != nil {
			done()
		}
	}()
	return ch
}
