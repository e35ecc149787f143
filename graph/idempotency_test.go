package graph

import (
	"context"
	"encoding/json"
	"math/big"
	"testing"

	"github.com/ethereum/go-ethereum/common"
	"github.com/stretchr/testify/require"
)

// TestSendIdempotencyKey: the send mutation's idempotencyKey has REST's
// Idempotency-Key semantics: the same input again answers the first
// result (replayed true, one transfer), another input with the key is
// IDEMPOTENCY_KEY_REUSED, a kept refusal comes back marked replayed, and a
// malformed key is BAD_USER_INPUT.
func TestSendIdempotencyKey(t *testing.T) {
	api := newAgentAPI(t, agentAPIConfig{Base: true})
	a := api.register(t, uniqueName(t, "snd"))
	b := api.register(t, uniqueName(t, "rcv"))
	_, err := api.Base.Send(context.Background(), common.HexToAddress(a.Wallets[1].Address), big.NewInt(10_000_000))
	require.NoError(t, err)

	const mutation = `mutation($in: SendInput!) { send(input: $in) {
		transactionId amountUsd feeUsd chain txHash status message replayed transfer { id status } } }`
	type payload struct {
		Send struct {
			TransactionID, Chain, Status, Message string
			TxHash                                *string
			AmountUsd, FeeUsd                     json.Number
			Replayed                              bool
			Transfer                              struct{ ID, Status string }
		}
	}
	in := map[string]any{"toUsername": b.Username, "amountUsd": 5, "chain": "base", "idempotencyKey": "gql-1"}
	var first, again payload
	api.do(t, a.APIKey, mutation, map[string]any{"in": in}).decode(t, &first)
	require.False(t, first.Send.Replayed)
	require.Equal(t, "COMPLETED", first.Send.Status)
	api.do(t, a.APIKey, mutation, map[string]any{"in": in}).decode(t, &again)
	require.True(t, again.Send.Replayed)
	first.Send.Replayed = true
	require.Equal(t, first, again, "the first answer")

	var p transferPage
	api.do(t, a.APIKey, transfersQuery, map[string]any{"first": 5}).decode(t, &p)
	require.Equal(t, 1, p.Me.Transfers.TotalCount, "sent once")

	other := map[string]any{"toUsername": b.Username, "amountUsd": 4, "chain": "base", "idempotencyKey": "gql-1"}
	out := api.do(t, a.APIKey, mutation, map[string]any{"in": other})
	require.Equal(t, "IDEMPOTENCY_KEY_REUSED", out.code(t))
	require.Nil(t, out.Errors[0].Extensions["replayed"])

	tooMuch := map[string]any{"toUsername": b.Username, "amountUsd": 50, "chain": "base", "idempotencyKey": "gql-2"}
	out = api.do(t, a.APIKey, mutation, map[string]any{"in": tooMuch})
	require.Equal(t, "INSUFFICIENT_FUNDS", out.code(t))
	require.Nil(t, out.Errors[0].Extensions["replayed"])
	replayed := api.do(t, a.APIKey, mutation, map[string]any{"in": tooMuch})
	require.Equal(t, "INSUFFICIENT_FUNDS", replayed.code(t))
	require.Equal(t, true, replayed.Errors[0].Extensions["replayed"])
	require.Equal(t, out.Errors[0].Message, replayed.Errors[0].Message)

	bad := map[string]any{"toUsername": b.Username, "amountUsd": 1, "chain": "base", "idempotencyKey": ""}
	out = api.do(t, a.APIKey, mutation, map[string]any{"in": bad})
	require.Equal(t, "BAD_USER_INPUT", out.code(t))
	require.Contains(t, out.Errors[0].Message, "Idempotency-Key: must be 1 to 255 characters long")

	api.do(t, a.APIKey, transfersQuery, map[string]any{"first": 5}).decode(t, &p)
	require.Equal(t, 1, p.Me.Transfers.TotalCount, "nothing else moved")
}
