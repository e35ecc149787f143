package store_test

import (
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"agentpay/internal/store"
)

// TestGroupBatchJoinsTheNextBatch: a call that arrives while a batch runs
// waits for the next one, which takes every waiting call up to the bound;
// every call is answered.
func TestGroupBatchJoinsTheNextBatch(t *testing.T) {
	t.Parallel()
	type call struct {
		n    int
		done chan struct{}
	}
	var (
		mu      sync.Mutex
		batches [][]int
		hold    = make(chan struct{})
	)
	g := store.NewGroupBatch(3, func(batch []*call) {
		ns := make([]int, len(batch))
		for i, c := range batch {
			ns[i] = c.n
		}
		mu.Lock()
		first := len(batches) == 0
		batches = append(batches, ns)
		mu.Unlock()
		if first {
			<-hold // every other call arrives while this batch runs
		}
		for _, c := range batch {
			close(c.done)
		}
	})

	calls := make([]*call, 8)
	for i := range calls {
		calls[i] = &call{n: i, done: make(chan struct{})}
	}
	go g.Submit(calls[0])
	require.Eventually(t, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(batches) == 1
	}, 10*time.Second, time.Millisecond)
	for _, c := range calls[1:] {
		go g.Submit(c)
		// In order, so the batches' contents are known.
		require.Eventually(t, func() bool { queued, _ := g.Counts(); return queued == int64(c.n+1) }, 10*time.Second, time.Millisecond)
	}
	close(hold)
	for _, c := range calls {
		select {
		case <-c.done:
		case <-time.After(10 * time.Second):
			t.Fatalf("call %d not answered", c.n)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	require.Equal(t, [][]int{{0}, {1, 2, 3}, {4, 5, 6}, {7}}, batches)
	queued, started := g.Counts()
	require.Equal(t, [2]int64{8, 4}, [2]int64{queued, started})
}
