package evm

import (
	"context"
	"errors"
	"fmt"
	"math/big"

	"github.com/ethereum/go-ethereum"
	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"

	"agentpay/chains"
)

// DepositsIn reads the token's Transfer logs to `to` in the receipt of
// txHash, each as the Watcher decodes a log (chains.DepositReader): the
// log index is the block-wide one a scan's eth_getLogs reports. A pending,
// unknown or reverted transaction made none.
func (l *Ledger) DepositsIn(ctx context.Context, txHash, to string) ([]chains.Deposit, error) {
	hash, err := parseTxHash(txHash)
	if err != nil {
		return nil, err
	}
	recipient, err := parseAddress(to)
	if err != nil {
		return nil, err
	}
	rc, err := l.client.TransactionReceipt(ctx, hash)
	if errors.Is(err, ethereum.NotFound) || IndexingInProgress(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("evm: %s: receipt of %s: %w", l.cfg.Chain, txHash, err)
	}
	if rc.Status != types.ReceiptStatusSuccessful {
		return nil, nil
	}
	var out []chains.Deposit
	for _, lg := range rc.Logs {
		if lg == nil || lg.Removed || lg.Address != l.token.address || len(lg.Topics) != 3 ||
			lg.Topics[0] != transferTopic || len(lg.Data) != 32 {
			continue
		}
		amount := new(big.Int).SetBytes(lg.Data)
		if amount.Sign() == 0 || common.BytesToAddress(lg.Topics[2][12:]) != recipient {
			continue
		}
		out = append(out, chains.Deposit{
			Chain:     l.cfg.Chain,
			TxHash:    lg.TxHash.Hex(),
			Index:     lg.Index,
			From:      common.BytesToAddress(lg.Topics[1][12:]).Hex(),
			To:        recipient.Hex(),
			Amount:    amount,
			Block:     lg.BlockNumber,
			BlockHash: lg.BlockHash.Hex(),
		})
	}
	return out, nil
}

var _ chains.DepositReader = (*Ledger)(nil)
