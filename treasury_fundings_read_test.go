package agentpay

import (
	"context"
	"math/big"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"agentpay/chains"
	"agentpay/internal/testenv"
)

// countingReader is a ledger that only reads transactions' deposits, and
// counts the reads.
type countingReader struct {
	chains.Ledger
	mu    sync.Mutex
	reads []string
}

func (r *countingReader) DepositsIn(_ context.Context, txHash, _ string) ([]chains.Deposit, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.reads = append(r.reads, txHash)
	return nil, nil
}

// TestReadInboundSkipsOwnTransfersBeforeReading: a final transfer to a
// holder from the treasury or a custodial wallet (the service's own: a
// send, a fee leg, a card return) is dropped in memory, without the call
// that reads its transaction; one from outside is read and kept.
func TestReadInboundSkipsOwnTransfersBeforeReading(t *testing.T) {
	t.Parallel()
	svc := newTestService(t, testenv.New(t, testenv.Options{}), Config{})
	const (
		treasury  = "0x1111111111111111111111111111111111111111"
		custodial = "0x2222222222222222222222222222222222222222"
		outsider  = "0x3333333333333333333333333333333333333333"
	)
	norm := svc.wallets(chains.Base).NormalizeAddress
	holders := inboundWatch{norm(treasury): treasury, norm(custodial): custodial}
	final := func(tx, from, to string) chains.DepositEvent {
		return chains.DepositEvent{Kind: chains.DepositFinal, Deposit: chains.Deposit{
			Chain: chains.Base, TxHash: tx, From: from, To: to, Amount: big.NewInt(1_000_000)}}
	}
	reader := &countingReader{}
	ins := svc.readInbound(context.Background(), reader, holders, chains.Base, []chains.DepositEvent{
		final("0xaa", outsider, treasury),
		final("0xbb", treasury, custodial),
		final("0xcc", custodial, treasury),
		final("0xdd", "0x2222222222222222222222222222222222222222", custodial),
	})
	require.Len(t, ins, 1)
	require.Equal(t, "0xaa", ins[0].dep.TxHash)
	require.Equal(t, []string{"0xaa"}, reader.reads, "the service's own transfers are not read from the chain")
}
