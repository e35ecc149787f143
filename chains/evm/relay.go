package evm

import (
	"context"
	"errors"
	"fmt"
	"math/big"
	"sync"
	"time"

	ethereum "github.com/ethereum/go-ethereum"
	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/crypto"

	"agentpay/chains"
)

// Relaying authorizations signed by third parties (a payer's wallet, an
// x402 client): the payer signs an EIP-3009 TransferWithAuthorization of
// the token to some address, and the ledger's gas wallet executes it, so
// the payer needs USDC only. Unlike Transfer, the ledger holds no key of
// the source: it checks the signature instead, and everything else the
// token would check, before spending gas on a transaction that would
// revert.

var _ chains.AuthorizationRelayer = (*Ledger)(nil)

// AuthorizationMargin is how long an authorization must stay valid after
// the chain's current time to be relayed: room for the transaction to be
// included (a few blocks on every chain the adapter serves).
const AuthorizationMargin = 6 * time.Second

// domainCache keeps the token's EIP-712 name and version once read.
type domainCache struct {
	mu  sync.Mutex
	got *chains.TokenDomain
}

// TokenDomain is the token's EIP-712 domain: name() and version() as the
// token answers them (USDC's "USD Coin"/"2" when it does not), checked
// against the domain separator the ledger read at start, so a domain
// answered here is the one the token verifies signatures under.
func (l *Ledger) TokenDomain(ctx context.Context) (chains.TokenDomain, error) {
	l.domainCache.mu.Lock()
	defer l.domainCache.mu.Unlock()
	if l.domainCache.got != nil {
		return *l.domainCache.got, nil
	}
	name, version := "USD Coin", "2"
	if v, err := l.token.call(ctx, "name"); err == nil && v.(string) != "" {
		name = v.(string)
	}
	if v, err := l.token.call(ctx, "version"); err == nil && v.(string) != "" {
		version = v.(string)
	}
	if eip712Domain(name, version, l.chainID, l.token.address) != l.domain {
		return chains.TokenDomain{}, fmt.Errorf("evm: %s: token %s's domain separator is not that of name %q version %q",
			l.cfg.Chain, l.token.address.Hex(), name, version)
	}
	d := chains.TokenDomain{Name: name, Version: version, ChainID: l.chainID.Uint64(), VerifyingContract: l.token.address.Hex()}
	l.domainCache.got = &d
	return d, nil
}

// parsedAuthorization is a chains.Authorization read into the token's types.
type parsedAuthorization struct {
	authorization
	v    uint8
	r, s [32]byte
}

func parseAuthorization(a chains.Authorization) (parsedAuthorization, error) {
	var p parsedAuthorization
	from, err := parseAddress(a.From)
	if err != nil {
		return p, chains.RefusedAuthorization(chains.AuthorizationMalformed, "from: %v", err)
	}
	to, err := parseAddress(a.To)
	if err != nil {
		return p, chains.RefusedAuthorization(chains.AuthorizationMalformed, "to: %v", err)
	}
	maxU256 := new(big.Int).Lsh(big.NewInt(1), 256)
	for _, f := range []struct {
		name     string
		v        *big.Int
		positive bool
	}{{"value", a.Value, true}, {"validAfter", a.ValidAfter, false}, {"validBefore", a.ValidBefore, false}} {
		if f.v == nil || f.v.Sign() < 0 || (f.positive && f.v.Sign() == 0) || f.v.Cmp(maxU256) >= 0 {
			return p, chains.RefusedAuthorization(chains.AuthorizationMalformed, "%s must be a uint256%s", f.name,
				map[bool]string{true: " above 0", false: ""}[f.positive])
		}
	}
	if len(a.Signature) != 65 {
		return p, chains.RefusedAuthorization(chains.AuthorizationMalformed, "signature must be 65 bytes (r, s, v), not %d", len(a.Signature))
	}
	p.authorization = authorization{
		From: from, To: to, Value: new(big.Int).Set(a.Value),
		ValidAfter: new(big.Int).Set(a.ValidAfter), ValidBefore: new(big.Int).Set(a.ValidBefore), Nonce: a.Nonce,
	}
	copy(p.r[:], a.Signature[:32])
	copy(p.s[:], a.Signature[32:64])
	p.v = a.Signature[64]
	if p.v < 27 {
		p.v += 27
	}
	return p, nil
}

// signer recovers the address that signed p under domain; the token's
// rules (v 27 or 28, s in the lower half of the order) apply, so a
// signature recovered here is one the token accepts.
func (p parsedAuthorization) signer(domain common.Hash) (common.Address, bool) {
	if p.v != 27 && p.v != 28 {
		return common.Address{}, false
	}
	r, s := new(big.Int).SetBytes(p.r[:]), new(big.Int).SetBytes(p.s[:])
	if !crypto.ValidateSignatureValues(p.v-27, r, s, true) {
		return common.Address{}, false
	}
	sig := make([]byte, 65)
	copy(sig, p.r[:])
	copy(sig[32:], p.s[:])
	sig[64] = p.v - 27
	d := p.digest(domain)
	pub, err := crypto.SigToPub(d[:], sig)
	if err != nil {
		return common.Address{}, false
	}
	return crypto.PubkeyToAddress(*pub), true
}

// VerifyAuthorization implements chains.AuthorizationRelayer.
func (l *Ledger) VerifyAuthorization(ctx context.Context, a chains.Authorization) error {
	_, err := l.verifyAuthorization(ctx, a)
	return err
}

// verifyAuthorization checks a as the token will, at the head block, and
// answers it parsed with the head it was checked at.
func (l *Ledger) verifyAuthorization(ctx context.Context, a chains.Authorization) (parsedAuthorization, error) {
	p, err := parseAuthorization(a)
	if err != nil {
		return p, err
	}
	if signer, ok := p.signer(l.domain); !ok || signer != p.From {
		return p, chains.RefusedAuthorization(chains.AuthorizationSignature,
			"the signature is not %s's over this TransferWithAuthorization under the token's EIP-712 domain (chain id %s, contract %s)",
			p.From.Hex(), l.chainID, l.token.address.Hex())
	}
	head, err := l.client.HeaderByNumber(ctx, nil)
	if err != nil {
		return p, fmt.Errorf("evm: reading head: %w", err)
	}
	// The chain's time: the head's, or ours when the chain has not sealed
	// a block for a while (the next block is at least as late as both).
	now := int64(head.Time)
	if wall := time.Now().Unix(); wall > now {
		now = wall
	}
	if p.ValidAfter.Cmp(big.NewInt(int64(head.Time))) >= 0 {
		return p, chains.RefusedAuthorization(chains.AuthorizationNotYetValid,
			"validAfter %s has not passed (chain time %d)", p.ValidAfter, head.Time)
	}
	if p.ValidBefore.Cmp(big.NewInt(now+int64(AuthorizationMargin/time.Second))) <= 0 {
		return p, chains.RefusedAuthorization(chains.AuthorizationExpired,
			"validBefore %s is past or within %s of the chain's time %d: too late to be included", p.ValidBefore, AuthorizationMargin, now)
	}
	used, err := l.token.authorizationState(ctx, p.From, p.Nonce)
	if err != nil {
		return p, fmt.Errorf("evm: %s: authorizationState: %w", l.cfg.Chain, err)
	}
	if used {
		return p, chains.RefusedAuthorization(chains.AuthorizationUsed, "nonce 0x%x of %s was already used or cancelled", p.Nonce, p.From.Hex())
	}
	bal, err := l.token.balanceOf(ctx, p.From)
	if err != nil {
		return p, fmt.Errorf("evm: %s: balanceOf: %w", l.cfg.Chain, err)
	}
	if bal.Cmp(p.Value) < 0 {
		return p, chains.RefusedAuthorization(chains.AuthorizationInsufficient,
			"%s holds %s base units, less than the %s authorized", p.From.Hex(), bal, p.Value)
	}
	return p, nil
}

// RelayAuthorization implements chains.AuthorizationRelayer: after
// verifyAuthorization, the gas wallet sends transferWithAuthorization with
// the payer's signature. Relays of one (From, Nonce) are serialised in
// this process and a live one is answered again, as Transfer does for a
// Ref; across processes the token lets only one of them move the funds.
func (l *Ledger) RelayAuthorization(ctx context.Context, a chains.Authorization) (chains.Submitted, error) {
	if l.gasKey == nil {
		return chains.Submitted{}, ErrNoGasKey
	}
	p, err := parseAuthorization(a)
	if err != nil {
		return chains.Submitted{}, err
	}
	release := l.byRef.Lock(p.From, p.Nonce)
	defer release()
	if sub, alive, err := l.byRef.Alive(ctx, p.From, p.Nonce, l.Receipt); err != nil || alive {
		return sub, err
	}
	if p, err = l.verifyAuthorization(ctx, a); err != nil {
		return chains.Submitted{}, err
	}
	data, err := parsedABI.Pack("transferWithAuthorization", p.From, p.To, p.Value, p.ValidAfter, p.ValidBefore, p.Nonce, p.v, p.r, p.s)
	if err != nil {
		return chains.Submitted{}, fmt.Errorf("evm: packing transferWithAuthorization: %w", err)
	}
	// The estimate is the token's own last word: a race with another relay
	// of the same nonce, or a balance spent since, is refused here at no gas.
	gas, err := l.client.EstimateGas(ctx, ethereum.CallMsg{From: l.gasAddr, To: &l.token.address, Data: data})
	if err != nil {
		err = classifyRevert(err)
		switch {
		case errors.Is(err, ErrAuthorizationUsed):
			return chains.Submitted{}, chains.RefusedAuthorization(chains.AuthorizationUsed, "nonce 0x%x of %s was already used", p.Nonce, p.From.Hex())
		case errors.Is(err, ErrInsufficientBalance):
			return chains.Submitted{}, chains.RefusedAuthorization(chains.AuthorizationInsufficient, "%s holds less than %s base units", p.From.Hex(), p.Value)
		}
		return chains.Submitted{}, err
	}
	gas += gas * l.cfg.GasMargin / 100
	head, err := l.client.HeaderByNumber(ctx, nil)
	if err != nil {
		return chains.Submitted{}, fmt.Errorf("evm: reading head: %w", err)
	}
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
	sub := chains.Submitted{TxHash: tx.Hash().Hex(), From: p.From.Hex()}
	l.byRef.Put(p.From, p.Nonce, sub)
	return sub, nil
}
