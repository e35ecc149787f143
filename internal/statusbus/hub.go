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
	mu       sync.Mutex
	subs     map[address]map[chan string]struct{}
	watchers map[Topic]map[*watcher]struct{}
}

// watcher is one Watch registration (a pointer, so that it can be told
// apart when it leaves).
type watcher struct{ f func(key, message string) }

// address is where a subscriber listens.
type address struct {
	topic Topic
	key   string
}

func newHub() *hub {
	return &hub{subs: map[address]map[chan string]struct{}{}, watchers: map[Topic]map[*watcher]struct{}{}}
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

// deliver tells the topic's watchers first, so that a subscriber that
// re-reads on a message never reads what a watcher still holds.
func (h *hub) deliver(topic Topic, key, message string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for w := range h.watchers[topic] {
		w.f(key, message)
	}
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
	h.resyncWatchersLocked()
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

// resyncWatchers tells every watcher that messages may be missed (the
// listener connection was lost).
func (h *hub) resyncWatchers() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.resyncWatchersLocked()
}

func (h *hub) resyncWatchersLocked() {
	for _, m := range h.watchers {
		for w := range m {
			w.f(Resync, Resync)
		}
	}
}

// watch registers f for every message of topic until ctx ends; done, when
// not nil, runs after it is removed.
func (h *hub) watch(ctx context.Context, topic Topic, f func(key, message string), done func()) {
	w := &watcher{f: f}
	h.mu.Lock()
	m := h.watchers[topic]
	if m == nil {
		m = map[*watcher]struct{}{}
		h.watchers[topic] = m
	}
	m[w] = struct{}{}
	h.mu.Unlock()
	go func() {
		<-ctx.Done()
		h.mu.Lock()
		delete(h.watchers[topic], w)
		if len(h.watchers[topic]) == 0 {
			delete(h.watchers, topic)
		}
		h.mu.Unlock()
		if done != nil {
			done()
		}
	}()
}
