package solana

import (
	"context"
	"testing"
	"time"

	"github.com/gagliardetto/solana-go"
	"github.com/gagliardetto/solana-go/rpc"
	"github.com/stretchr/testify/require"

	"agentpay/chains"
	"agentpay/chains/devnet"
)

// BenchmarkScan scans a run of slots holding 1,000 USDC transfers (sent at
// once into 100 ms slots, built once) against 10 and against 100,000
// watched owners, as the EVM BenchmarkScan does with blocks. Both sets
// contain the same 10 recipients, so both find the same 10 deposits and any
// difference is the cost of the set's size. Reported as ms per slot (the
// slots from the first transfer to the last, skipped or empty ones
// included) over JSON-RPC on loopback to the LiteSVM devnet.
//
//	go test ./chains/solana/ -run '^$' -bench BenchmarkScan -benchtime 20x
func BenchmarkScan(b *testing.B) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	dn, err := devnet.StartSolana(ctx, devnet.SolanaConfig{SlotTime: 100 * time.Millisecond})
	require.NoError(b, err)
	b.Cleanup(func() { _ = dn.Close() })

	recipients := make([]solana.PublicKey, 1_000)
	for i := range recipients {
		recipients[i] = randomOwner(b)
	}
	sigs, err := dn.SendAll(ctx, recipients, 1)
	require.NoError(b, err)
	first, last := transferSlots(ctx, b, dn, sigs)
	slots := last - first + 1

	hits := make([]string, 10)
	for i := range hits {
		hits[i] = recipients[i*100].String()
	}
	large := append([]string{}, hits...)
	for len(large) < 100_000 {
		large = append(large, randomOwner(b).String())
	}
	sets := []struct {
		name  string
		owner []string
	}{
		{"watched=10", hits},
		{"watched=100000", large},
	}
	for _, set := range sets {
		list := NewWatchlist(set.owner)
		b.Run(set.name, func(b *testing.B) {
			w, err := NewWatcher(WatcherConfig{RPCURL: dn.RPCURL, Mint: dn.Mint.String(), MaxSlotsPerPoll: slots})
			require.NoError(b, err)
			// Every poll does the same work: the slots' blocks, the
			// matching, one getSignatureStatuses of what it found. One
			// untimed first, so the connection and the node's caches are
			// warm for each set alike.
			poll := func() ([]chains.DepositEvent, error) {
				w.next, w.recent = first, nil
				w.pending, w.finals = map[string]*pendingDeposit{}, map[string]uint64{}
				return w.Poll(ctx, list)
			}
			_, err = poll()
			require.NoError(b, err)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				evs, err := poll()
				if err != nil {
					b.Fatal(err)
				}
				if w.next != last+1 {
					b.Fatalf("scanned to %d, want %d", w.next-1, last)
				}
				if len(w.pending)+len(w.finals) != len(hits) || len(evs) < len(hits) {
					b.Fatalf("found %d deposits (%d events), want %d", len(w.pending)+len(w.finals), len(evs), len(hits))
				}
			}
			b.StopTimer()
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/1e6/float64(uint64(b.N)*slots), "ms/slot")
			b.ReportMetric(float64(slots), "slots")
		})
	}
}

func randomOwner(tb testing.TB) solana.PublicKey {
	k, err := solana.NewRandomPrivateKey()
	require.NoError(tb, err)
	return k.PublicKey()
}

// transferSlots is the first and last slot the transactions landed in, once
// all of them are confirmed.
func transferSlots(ctx context.Context, tb testing.TB, dn *devnet.Solana, sigs []solana.Signature) (uint64, uint64) {
	var first, last uint64
	for start := 0; start < len(sigs); start += statusBatch {
		batch := sigs[start:min(start+statusBatch, len(sigs))]
		res, err := dn.Client().GetSignatureStatuses(ctx, true, batch...)
		require.NoError(tb, err)
		for i, st := range res.Value {
			require.NotNil(tb, st, batch[i])
			if first == 0 || st.Slot < first {
				first = st.Slot
			}
			last = max(last, st.Slot)
		}
	}
	// The watcher scans at commitment confirmed: wait until the last slot
	// is.
	for {
		head, err := dn.Client().GetSlot(ctx, rpc.CommitmentConfirmed)
		require.NoError(tb, err)
		if head >= last {
			return first, last
		}
		time.Sleep(50 * time.Millisecond)
	}
}
