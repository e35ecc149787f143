package agentpay

import (
	"math/big"
	"testing"

	"github.com/stretchr/testify/require"

	"agentpay/chains"
	"agentpay/internal/testenv"
)

// TestReadInbound: a final transfer to a holder from the treasury or a
// custodial wallet (the service's own: a send, a fee leg, a card return) is
// dropped in memory; those from outside are grouped by transaction and
// holder, summed from the scan's own events (no call reads the
// transaction), and one not final yet is left for its final event.
func TestReadInbound(t *testing.T) {
	t.Parallel()
	svc := newTestService(t, testenv.New(t, testenv.Options{}), Config{})
	const (
		treasury  = "0x1111111111111111111111111111111111111111"
		custodial = "0x2222222222222222222222222222222222222222"
		outsider  = "0x3333333333333333333333333333333333333333"
	)
	norm := svc.wallets(chains.Base).NormalizeAddress
	holders := inboundWatch{norm(treasury): treasury, norm(custodial): custodial}
	ev := func(kind chains.DepositEventKind, tx string, index uint, from, to string, amount int64) chains.DepositEvent {
		return chains.DepositEvent{Kind: kind, Deposit: chains.Deposit{
			Chain: chains.Base, TxHash: tx, Index: index, From: from, To: to, Amount: big.NewInt(amount)}}
	}
	final := chains.DepositFinal
	ins := svc.readInbound(holders, chains.Base, []chains.DepositEvent{
		ev(final, "0xaa", 0, outsider, treasury, 1_000_000),
		ev(final, "0xbb", 0, treasury, custodial, 5),
		ev(final, "0xcc", 0, custodial, treasury, 5),
		ev(final, "0xdd", 0, "0x2222222222222222222222222222222222222222", custodial, 5),
		ev(final, "0xaa", 3, outsider, treasury, 250_000),        // a second transfer in the same transaction
		ev(final, "0xaa", 4, outsider, custodial, 7),             // to another holder: its own funding
		ev(chains.DepositSeen, "0xee", 0, outsider, treasury, 9), // not final yet
	})
	require.Len(t, ins, 2)
	require.Equal(t, "0xaa", ins[0].dep.TxHash)
	require.Equal(t, treasury, ins[0].to)
	require.Equal(t, big.NewInt(1_250_000), ins[0].total)
	require.Equal(t, custodial, ins[1].to)
	require.Equal(t, big.NewInt(7), ins[1].total)
}
