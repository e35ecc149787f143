// Package evm is the adapter for EVM chains (Base, Arbitrum, Ethereum,
// Polygon): it moves USDC by relaying EIP-3009 transferWithAuthorization
// signed by the custodial source key, with gas paid by one relayer wallet,
// and watches deposits by scanning USDC Transfer logs. Wallets is the EVM
// family's keys (BIP-44), addresses, EIP-681 payment URIs and EIP-712
// wallet signatures.
//
// Address normalisation: the adapter returns EIP-55 checksummed addresses;
// watchers call Watchlist.Contains with "0x" + 40 lowercase hex digits
// (NormalizeAddress).
package evm

import (
	"context"
	"crypto/ecdsa"
	"errors"
	"fmt"
	"math/big"
	"net/url"
	"time"

	ethereum "github.com/ethereum/go-ethereum"
	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/crypto"
	"github.com/ethereum/go-ethereum/ethclient"
	"github.com/ethereum/go-ethereum/rpc"

	"agentpay/chains"
	"agentpay/chains/internal/recent"
	"agentpay/internal/redact"
)

// Ledger implements chains.Ledger on one EVM chain.
type Ledger struct {
	cfg     Config
	client  Client
	dialed  *ethclient.Client // closed by Close; nil when the client was injected
	chainID *big.Int
	signer  types.Signer
	token   token
	domain  common.Hash

	gasKey  *ecdsa.PrivateKey
	gasAddr common.Address
	nonces  *nonceSender

	// byRef remembers what this ledger relayed per (source, Ref) for the
	// life of an authorization, and serialises relays of the same pair.
	byRef *recent.Transfers[common.Address]

	// domainCache holds the token's EIP-712 name and version (relay.go).
	domainCache domainCache
}

var _ chains.Ledger = (*Ledger)(nil)
var _ chains.FeeReader = (*Ledger)(nil)

// New connects to the chain, checks that the node and token match the
// config (chain id, token code, decimals) and reads the token's EIP-712
// domain, so misconfiguration fails at start rather than at the first payment.
func New(ctx context.Context, cfg Config) (*Ledger, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, permanent{err}
	}
	client, dialed, err := connect(ctx, cfg)
	if err != nil {
		return nil, err
	}
	l, err := newLedger(ctx, cfg, client)
	if err != nil {
		if dialed != nil {
			dialed.Close()
		}
		return nil, err
	}
	l.dialed = dialed
	return l, nil
}

func newLedger(ctx context.Context, cfg Config, client Client) (*Ledger, error) {
	var (
		chainID *big.Int
		tok     token
		domain  common.Hash
	)
	err := retryStart(ctx, cfg.StartPatience, func() error {
		var err error
		chainID, tok, err = checkChain(ctx, cfg, client)
		if err != nil {
			return err
		}
		if d, err := tok.decimals(ctx); err == nil && int32(d) != cfg.Decimals {
			return permanent{fmt.Errorf("evm: %s: token %s has %d decimals, config says %d", cfg.Chain, cfg.USDC, d, cfg.Decimals)}
		}
		domain, err = tok.domainSeparator(ctx, chainID)
		if err != nil {
			return fmt.Errorf("evm: %s: reading token domain: %w", cfg.Chain, err)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	l := &Ledger{
		cfg:     cfg,
		client:  client,
		chainID: chainID,
		signer:  types.LatestSignerForChainID(chainID),
		token:   tok,
		domain:  domain,
		byRef:   recent.New[common.Address](cfg.AuthorizationTTL),
	}
	if cfg.GasKey != nil {
		key, err := crypto.ToECDSA(cfg.GasKey)
		if err != nil {
			return nil, permanent{fmt.Errorf("evm: %s: gas key: %w", cfg.Chain, ErrInvalidKey)}
		}
		l.gasKey = key
		l.gasAddr = crypto.PubkeyToAddress(key.PublicKey)
		l.nonces = newNonceSender(client, l.gasAddr, cfg.Logger)
	}
	return l, nil
}

// connect returns the injected client or dials RPCURL.
// Every call on the client it returns has the configured deadline
// (deadlineClient).
func connect(ctx context.Context, cfg Config) (Client, *ethclient.Client, error) {
	if cfg.Client != nil {
		return withDeadline(cfg.Client, cfg.RPCTimeout), nil, nil
	}
	c, err := dial(ctx, cfg.RPCURL)
	if err != nil {
		return nil, nil, fmt.Errorf("evm: %s: dialing RPC: %w", cfg.Chain, err)
	}
	return withDeadline(c, cfg.RPCTimeout), c, nil
}

// dial connects to rawURL, which may carry the provider's key, so that no
// error can show it. Over HTTP the RPC client is given the redacted URL and
// a transport that sends to the real one (redact.HTTPClient), since
// net/http puts the request URL in its errors; a websocket is dialled once,
// here, and its errors carry no URL.
func dial(ctx context.Context, rawURL string) (*ethclient.Client, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		// url.Parse's error quotes the URL.
		return nil, errors.New("the RPC URL does not parse")
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		c, err := rpc.DialContext(ctx, rawURL)
		if err != nil {
			return nil, err
		}
		return ethclient.NewClient(c), nil
	}
	dialURL, hc, err := redact.HTTPClient(rawURL, nil)
	if err != nil {
		return nil, err
	}
	c, err := rpc.DialOptions(ctx, dialURL, rpc.WithHTTPClient(hc))
	if err != nil {
		return nil, err
	}
	return ethclient.NewClient(c), nil
}

// checkChain verifies the node's chain id and that the token has code.
func checkChain(ctx context.Context, cfg Config, client Client) (*big.Int, token, error) {
	chainID, err := client.ChainID(ctx)
	if err != nil {
		return nil, token{}, fmt.Errorf("evm: %s: reading chain id: %w", cfg.Chain, err)
	}
	if cfg.ChainID != 0 && chainID.Cmp(new(big.Int).SetUint64(cfg.ChainID)) != 0 {
		return nil, token{}, permanent{fmt.Errorf("evm: %s: node reports chain id %s, config says %d", cfg.Chain, chainID, cfg.ChainID)}
	}
	tok := token{client: client, address: common.HexToAddress(cfg.USDC)}
	code, err := client.CodeAt(ctx, tok.address, nil)
	if err != nil {
		return nil, token{}, fmt.Errorf("evm: %s: reading token code: %w", cfg.Chain, err)
	}
	if len(code) == 0 {
		return nil, token{}, permanent{fmt.Errorf("evm: %s: no contract at USDC address %s", cfg.Chain, cfg.USDC)}
	}
	return chainID, tok, nil
}

// Close releases the connection when New dialed it.
func (l *Ledger) Close() {
	if l.dialed != nil {
		l.dialed.Close()
	}
}

func (l *Ledger) Chain() chains.Name { return l.cfg.Chain }

// Token is the USDC contract address, EIP-55 checksummed.
func (l *Ledger) Token() string { return l.token.address.Hex() }

func (l *Ledger) Decimals() int32 { return l.cfg.Decimals }

// ChainID is the chain id the node reported.
func (l *Ledger) ChainID() uint64 { return l.chainID.Uint64() }

// GasAddress is the relayer wallet's address ("" without a gas key); it
// must hold native coin for gas.
func (l *Ledger) GasAddress() string {
	if l.gasKey == nil {
		return ""
	}
	return l.gasAddr.Hex()
}

func (l *Ledger) Head(ctx context.Context) (uint64, error) {
	return l.client.BlockNumber(ctx)
}

func (l *Ledger) Balance(ctx context.Context, address string) (*big.Int, error) {
	addr, err := parseAddress(address)
	if err != nil {
		return nil, err
	}
	b, err := l.token.balanceOf(ctx, addr)
	if err != nil {
		return nil, fmt.Errorf("evm: %s: balanceOf: %w", l.cfg.Chain, err)
	}
	return b, nil
}

func (l *Ledger) ValidateAddress(address string) error { return ValidateAddress(address) }

// Transfer signs a TransferWithAuthorization with the source key (nonce =
// req.Ref) and relays it in a transaction paid by the gas wallet. It returns
// the relaying transaction's hash once the node accepted it.
//
// A Ref relayed by this ledger and still pending or included returns that
// same transaction; a Ref already used on chain fails with
// ErrAuthorizationUsed. Either way the funds move at most once.
func (l *Ledger) Transfer(ctx context.Context, req chains.TransferRequest) (chains.Submitted, error) {
	if l.gasKey == nil {
		return chains.Submitted{}, ErrNoGasKey
	}
	src, err := crypto.ToECDSA(req.Key)
	if err != nil {
		return chains.Submitted{}, ErrInvalidKey
	}
	to, err := parseAddress(req.To)
	if err != nil {
		return chains.Submitted{}, chains.Mark(err, chains.ErrRefused)
	}
	if req.Amount == nil || req.Amount.Sign() <= 0 {
		return chains.Submitted{}, ErrInvalidAmount
	}
	from := crypto.PubkeyToAddress(src.PublicKey)

	// One relay per (source, Ref) at a time in this process, so concurrent
	// retries of one request cannot both spend gas on it.
	release := l.byRef.Lock(from, req.Ref)
	defer release()
	// Unsure whether an earlier relay lives (err), relaying again could only
	// burn gas on a revert: the caller retries. A failed or dropped one left
	// the authorization unused: it is relayed anew.
	if sub, alive, err := l.byRef.Alive(ctx, from, req.Ref, l.Receipt); err != nil || alive {
		return sub, err
	}

	head, err := l.client.HeaderByNumber(ctx, nil)
	if err != nil {
		return chains.Submitted{}, fmt.Errorf("evm: reading head: %w", err)
	}
	auth := authorization{
		From:        from,
		To:          to,
		Value:       new(big.Int).Set(req.Amount),
		ValidAfter:  new(big.Int),
		ValidBefore: big.NewInt(validBefore(time.Now(), head.Time, l.cfg.AuthorizationTTL)),
		Nonce:       req.Ref,
	}
	data, err := auth.calldata(l.domain, src)
	if err != nil {
		return chains.Submitted{}, fmt.Errorf("evm: signing authorization: %w", err)
	}

	// The estimate doubles as a dry run: a transfer that would revert
	// (spent Ref, short balance) is refused here and costs no gas.
	gas, err := l.client.EstimateGas(ctx, ethereum.CallMsg{From: l.gasAddr, To: &l.token.address, Data: data})
	if err != nil {
		return chains.Submitted{}, classifyRevert(err)
	}
	gas += gas * l.cfg.GasMargin / 100

	fees, err := l.fees(ctx, head)
	if err != nil {
		return chains.Submitted{}, err
	}
	tx, err := l.nonces.send(ctx, func(nonce uint64) (*types.Transaction, error) {
		return types.SignTx(fees.tx(l.chainID, nonce, l.token.address, gas, data), l.signer, l.gasKey)
	})
	if err != nil {
		return chains.Submitted{}, err
	}
	sub := chains.Submitted{TxHash: tx.Hash().Hex(), From: from.Hex()}
	l.byRef.Put(from, req.Ref, sub)
	return sub, nil
}

// validBefore is the end of an authorization's validity (Unix seconds):
// ttl after the later of this machine's clock and the head block's
// timestamp. The token compares it with block time, and a chain's clock can
// run ahead of ours (a skewed node; a devnet sealing blocks faster than one
// a second, each at least a second after its parent), which would make an
// authorization dated by our clock expired on arrival.
func validBefore(now time.Time, headTime uint64, ttl time.Duration) int64 {
	from := now.Unix()
	if t := int64(headTime); t > from {
		from = t
	}
	return from + int64(ttl/time.Second)
}

// feeQuote is what a relayed transaction pays for gas.
type feeQuote struct {
	tip, cap *big.Int // EIP-1559; cap nil means a legacy chain
	price    *big.Int // legacy gas price
}

// fees quotes EIP-1559 fees: the node's suggested tip and a cap of twice
// the current base fee plus the tip, which survives several full blocks of
// base fee growth (12.5% each) before the transaction stalls. Chains
// without a base fee get a legacy gas price.
func (l *Ledger) fees(ctx context.Context, head *types.Header) (feeQuote, error) {
	if head.BaseFee == nil {
		price, err := l.client.SuggestGasPrice(ctx)
		if err != nil {
			return feeQuote{}, fmt.Errorf("evm: suggesting gas price: %w", err)
		}
		return feeQuote{price: price}, nil
	}
	tip, err := l.client.SuggestGasTipCap(ctx)
	if err != nil {
		return feeQuote{}, fmt.Errorf("evm: suggesting gas tip: %w", err)
	}
	feeCap := new(big.Int).Mul(head.BaseFee, big.NewInt(2))
	feeCap.Add(feeCap, tip)
	return feeQuote{tip: tip, cap: feeCap}, nil
}

func (f feeQuote) tx(chainID *big.Int, nonce uint64, to common.Address, gas uint64, data []byte) *types.Transaction {
	if f.cap == nil {
		return types.NewTx(&types.LegacyTx{Nonce: nonce, GasPrice: f.price, Gas: gas, To: &to, Data: data})
	}
	return types.NewTx(&types.DynamicFeeTx{ChainID: chainID, Nonce: nonce, GasTipCap: f.tip, GasFeeCap: f.cap, Gas: gas, To: &to, Data: data})
}

// AuthorizationUsed reports whether ref was already used or cancelled by
// the holder of address, per the token.
func (l *Ledger) AuthorizationUsed(ctx context.Context, address string, ref [32]byte) (bool, error) {
	addr, err := parseAddress(address)
	if err != nil {
		return false, err
	}
	return l.token.authorizationState(ctx, addr, ref)
}

// permanent is an error of New's checks that asking again cannot change
// (the node is another chain, the token is not there or not USDC).
type permanent struct{ error }

func (p permanent) Unwrap() error { return p.error }

// retryStart runs New's checks until they pass, fail for good (permanent),
// ctx ends or patience has passed since the first failure: a node that
// fails one call (a dropped request, a 500 from its proxy) must not stop
// the process that is starting (under churn one start in five did); one
// that keeps failing for patience does. Waits start at 100 ms and double
// up to 2 s.
func retryStart(ctx context.Context, patience time.Duration, check func() error) error {
	deadline := time.Now().Add(patience)
	wait := 100 * time.Millisecond
	for {
		err := check()
		var p permanent
		if err == nil || errors.As(err, &p) || time.Now().Add(wait).After(deadline) {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(wait):
		}
		wait = min(2*wait, 2*time.Second)
	}
}

// Permanent reports whether err, from New, is one asking again cannot
// change (the node is another chain, the token is not there or not USDC,
// the configuration is invalid), as opposed to a node that failed to
// answer. A caller starting in the background gives up only on these.
func Permanent(err error) bool {
	var p permanent
	return errors.As(err, &p)
}
