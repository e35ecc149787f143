package evm

import (
	"context"
	"fmt"
	"math/big"

	ethereum "github.com/ethereum/go-ethereum"
	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/crypto"
)

// authorizationUsedTopic is FiatToken's (and EIP-3009's)
// AuthorizationUsed(address indexed authorizer, bytes32 indexed nonce).
var authorizationUsedTopic = crypto.Keccak256Hash([]byte("AuthorizationUsed(address,bytes32)"))

// FindAuthorization looks for the transaction that used the authorization
// (address, ref) in blocks fromBlock..head, newest first, and returns its
// hash. It is how a caller recovers the transaction of a Transfer that
// failed with ErrAuthorizationUsed, for instance after a restart lost the
// first attempt's response. found is false when no such log is in range.
func (l *Ledger) FindAuthorization(ctx context.Context, address string, ref [32]byte, fromBlock uint64) (txHash string, found bool, err error) {
	authorizer, err := parseAddress(address)
	if err != nil {
		return "", false, err
	}
	head, err := l.client.BlockNumber(ctx)
	if err != nil {
		return "", false, fmt.Errorf("evm: %s: reading head: %w", l.cfg.Chain, err)
	}
	// Newest first: the authorization was most likely used recently.
	for to := head; to >= fromBlock; {
		from := fromBlock
		if to-fromBlock+1 > l.cfg.ScanBatch {
			from = to - l.cfg.ScanBatch + 1
		}
		logs, err := l.client.FilterLogs(ctx, ethereum.FilterQuery{
			FromBlock: new(big.Int).SetUint64(from),
			ToBlock:   new(big.Int).SetUint64(to),
			Addresses: []common.Address{l.token.address},
			Topics:    [][]common.Hash{{authorizationUsedTopic}, {common.BytesToHash(authorizer[:])}, {common.Hash(ref)}},
		})
		if err != nil {
			return "", false, fmt.Errorf("evm: %s: eth_getLogs: %w", l.cfg.Chain, err)
		}
		for _, lg := range logs {
			if !lg.Removed {
				return lg.TxHash.Hex(), true, nil
			}
		}
		if from == 0 || from == fromBlock {
			break
		}
		to = from - 1
	}
	return "", false, nil
}
