package evm

import (
	"context"
	"fmt"
	"math/big"
	"strings"

	ethereum "github.com/ethereum/go-ethereum"
	"github.com/ethereum/go-ethereum/accounts/abi"
	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/crypto"
)

// tokenABI is the slice of Circle's FiatToken v2 interface the adapter uses.
// Only standard functions appear here, so the adapter works against real
// USDC as well as the devnet token.
const tokenABI = `[
{"type":"function","name":"balanceOf","stateMutability":"view","inputs":[{"name":"account","type":"address"}],"outputs":[{"name":"","type":"uint256"}]},
{"type":"function","name":"decimals","stateMutability":"view","inputs":[],"outputs":[{"name":"","type":"uint8"}]},
{"type":"function","name":"name","stateMutability":"view","inputs":[],"outputs":[{"name":"","type":"string"}]},
{"type":"function","name":"version","stateMutability":"view","inputs":[],"outputs":[{"name":"","type":"string"}]},
{"type":"function","name":"DOMAIN_SEPARATOR","stateMutability":"view","inputs":[],"outputs":[{"name":"","type":"bytes32"}]},
{"type":"function","name":"authorizationState","stateMutability":"view","inputs":[{"name":"authorizer","type":"address"},{"name":"nonce","type":"bytes32"}],"outputs":[{"name":"","type":"bool"}]},
{"type":"function","name":"transferWithAuthorization","stateMutability":"nonpayable","inputs":[{"name":"from","type":"address"},{"name":"to","type":"address"},{"name":"value","type":"uint256"},{"name":"validAfter","type":"uint256"},{"name":"validBefore","type":"uint256"},{"name":"nonce","type":"bytes32"},{"name":"v","type":"uint8"},{"name":"r","type":"bytes32"},{"name":"s","type":"bytes32"}],"outputs":[]},
{"type":"event","name":"Transfer","anonymous":false,"inputs":[{"name":"from","type":"address","indexed":true},{"name":"to","type":"address","indexed":true},{"name":"value","type":"uint256","indexed":false}]}
]`

var (
	parsedABI = func() abi.ABI {
		a, err := abi.JSON(strings.NewReader(tokenABI))
		if err != nil {
			panic(err)
		}
		return a
	}()
	// transferTopic is topic 0 of an ERC-20 Transfer log.
	transferTopic = crypto.Keccak256Hash([]byte("Transfer(address,address,uint256)"))
)

// token reads a USDC contract.
type token struct {
	client  Client
	address common.Address
}

// call runs a view function at the latest block and unpacks its single result.
func (t token) call(ctx context.Context, method string, args ...any) (any, error) {
	data, err := parsedABI.Pack(method, args...)
	if err != nil {
		return nil, err
	}
	out, err := t.client.CallContract(ctx, ethereum.CallMsg{To: &t.address, Data: data}, nil)
	if err != nil {
		return nil, err
	}
	vals, err := parsedABI.Unpack(method, out)
	if err != nil {
		return nil, fmt.Errorf("decoding %s: %w", method, err)
	}
	if len(vals) != 1 {
		return nil, fmt.Errorf("decoding %s: %d values", method, len(vals))
	}
	return vals[0], nil
}

func (t token) balanceOf(ctx context.Context, owner common.Address) (*big.Int, error) {
	v, err := t.call(ctx, "balanceOf", owner)
	if err != nil {
		return nil, err
	}
	return v.(*big.Int), nil
}

func (t token) authorizationState(ctx context.Context, authorizer common.Address, nonce [32]byte) (bool, error) {
	v, err := t.call(ctx, "authorizationState", authorizer, nonce)
	if err != nil {
		return false, err
	}
	return v.(bool), nil
}

func (t token) decimals(ctx context.Context) (uint8, error) {
	v, err := t.call(ctx, "decimals")
	if err != nil {
		return 0, err
	}
	return v.(uint8), nil
}

// domainSeparator is the token's EIP-712 domain separator. FiatToken v2
// exposes it as DOMAIN_SEPARATOR(); when a token does not, it is computed
// from name() and version() (defaulting to USDC's "USD Coin" and "2"),
// because the name differs between deployments (testnet USDC is "USDC").
func (t token) domainSeparator(ctx context.Context, chainID *big.Int) (common.Hash, error) {
	if v, err := t.call(ctx, "DOMAIN_SEPARATOR"); err == nil {
		return common.Hash(v.([32]byte)), nil
	}
	name, version := "USD Coin", "2"
	if v, err := t.call(ctx, "name"); err == nil && v.(string) != "" {
		name = v.(string)
	}
	if v, err := t.call(ctx, "version"); err == nil && v.(string) != "" {
		version = v.(string)
	}
	return eip712Domain(name, version, chainID, t.address), nil
}
