package evm

import (
	"context"
	"math/big"
	"testing"

	"github.com/ethereum/go-ethereum/common"
	"github.com/stretchr/testify/require"

	"agentpay/chains"
)

// BenchmarkScan scans a block range holding 1,000 USDC transfers (10 blocks
// of 100, built once) against 10 and against 100,000 watched addresses. Both
// sets contain the same 10 recipients, so both find the same 10 deposits and
// any difference is the cost of the set's size. Reported as ms per block.
//
//	go test ./chains/evm/ -run '^$' -bench BenchmarkScan -benchtime 20x
func BenchmarkScan(b *testing.B) {
	ctx := context.Background()
	c := startChain(b, chains.Base)
	before, err := c.Client().BlockNumber(ctx)
	require.NoError(b, err)
	recipients := make([]common.Address, 1_000)
	for i := range recipients {
		recipients[i] = randomAddress(b)
	}
	c.payerTransfers(b, recipients, big.NewInt(1), 100)
	head, err := c.Client().BlockNumber(ctx)
	require.NoError(b, err)
	start := before + 1
	blocks := head - start + 1

	hits := make([]string, 10)
	for i := range hits {
		hits[i] = recipients[i*100].Hex()
	}
	large := append([]string{}, hits...)
	for len(large) < 100_000 {
		large = append(large, randomAddress(b).Hex())
	}
	sets := []struct {
		name string
		wl   chains.Watchlist
	}{
		{"watched=10", NewWatchlist(hits)},
		{"watched=100000", NewWatchlist(large)},
	}

	for _, viaRPC := range []bool{false, true} {
		transport := "inproc"
		if viaRPC {
			transport = "http"
		}
		for _, set := range sets {
			b.Run(transport+"/"+set.name, func(b *testing.B) {
				// Deposits never go final here, so every iteration does the
				// same work: one eth_getLogs over the range plus the matching.
				w := c.watcher(b, viaRPC, 1_000_000, chains.WatcherState{Next: start})
				w.cfg.ScanBatch = blocks
				// One untimed poll first, so the connection and the
				// backend's caches are warm for each set alike (the first
				// set measured used to pay for them).
				w.st = watchState{next: start, pending: map[string]*tracked{}}
				_, err := w.Poll(ctx, set.wl)
				require.NoError(b, err)
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					w.st = watchState{next: start, pending: map[string]*tracked{}}
					ev, err := w.Poll(ctx, set.wl)
					if err != nil {
						b.Fatal(err)
					}
					if len(ev) != len(hits) {
						b.Fatalf("found %d deposits, want %d", len(ev), len(hits))
					}
				}
				b.StopTimer()
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/1e6/float64(uint64(b.N)*blocks), "ms/block")
				b.ReportMetric(float64(blocks), "blocks")
			})
		}
	}
}
