package adapters

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/big"
	"sync/atomic"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/crypto"

	"agentpay/chains"
	"agentpay/chains/evm"
	"agentpay/internal/redact"
)

// ErrChainStarting is what a chain's ledger answers while its start-time
// checks have not passed yet: its node failed them and they are being
// asked again in the background. It is transient: a job failing with it is
// retried, and the readiness probe reports the chain unreachable.
var ErrChainStarting = errors.New("chain not ready: its node has not answered the start-time checks yet")

// Start retry waits: the first try again comes soon (one dropped request
// is the common case), later ones back off so a node that is down is not
// hammered by every process of the deployment.
const (
	startRetryFirst = 200 * time.Millisecond
	startRetryMax   = 15 * time.Second
)

// startEVM builds an EVM chain's ledger without letting its node's health
// decide whether the process starts. The checks evm.New makes (chain id,
// token code, decimals, domain) are tried once; when they fail for a
// reason asking again can change (a dropped call, a 500, a node that is
// down) the chain is served by a pendingLedger that answers
// ErrChainStarting while a goroutine tries again with backoff until they
// pass or ctx ends. A wrong answer (another chain, no token there) is a
// misconfiguration and still fails the start.
func startEVM(ctx context.Context, cfg evm.Config, logger *slog.Logger) (chains.Ledger, error) {
	first := cfg
	// One quick pass at start; patience belongs to the background loop.
	first.StartPatience = time.Nanosecond
	l, err := evm.New(ctx, first)
	if err == nil {
		return l, nil
	}
	if evm.Permanent(err) {
		return nil, err
	}
	p := &pendingLedger{cfg: cfg, token: common.HexToAddress(cfg.USDC).Hex(), started: make(chan struct{})}
	if len(cfg.GasKey) > 0 {
		if k, kerr := crypto.ToECDSA(cfg.GasKey); kerr == nil {
			p.gasAddr = crypto.PubkeyToAddress(k.PublicKey).Hex()
		}
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	logger.WarnContext(ctx, "chain not ready at start; retrying in the background", "chain", cfg.Chain, "rpc", redact.URL(cfg.RPCURL), "err", err)
	go p.retry(ctx, logger)
	return p, nil
}

// pendingLedger is an EVM chain's ledger whose start-time checks have not
// passed yet. Every call waits for nothing: it answers ErrChainStarting
// until the background start succeeds, then forwards to the real ledger.
// It offers what an evm.Ledger offers (deposits, relays, fees), so the
// service's feature checks by type see the chain as it will be.
type pendingLedger struct {
	cfg     evm.Config
	token   string
	gasAddr string
	ready   atomic.Pointer[evm.Ledger]
	started chan struct{}
}

var (
	_ chains.Ledger               = (*pendingLedger)(nil)
	_ chains.FeeReader            = (*pendingLedger)(nil)
	_ chains.CostReader           = (*pendingLedger)(nil)
	_ chains.DepositReader        = (*pendingLedger)(nil)
	_ chains.AuthorizationRelayer = (*pendingLedger)(nil)
)

func (p *pendingLedger) retry(ctx context.Context, logger *slog.Logger) {
	wait := startRetryFirst
	for tries := 1; ; tries++ {
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
		cfg := p.cfg
		cfg.StartPatience = time.Nanosecond
		l, err := evm.New(ctx, cfg)
		if err == nil {
			p.ready.Store(l)
			close(p.started)
			logger.InfoContext(ctx, "chain ready", "chain", p.cfg.Chain, "tries", tries+1)
			return
		}
		if ctx.Err() != nil {
			return
		}
		level := slog.LevelWarn
		if evm.Permanent(err) {
			// The node answered, wrongly: keep reporting the chain not
			// ready (and say why) rather than serving a wrong chain.
			level = slog.LevelError
		}
		logger.Log(ctx, level, "chain still not ready", "chain", p.cfg.Chain, "tries", tries+1, "err", err)
		wait = min(2*wait, startRetryMax)
	}
}

func (p *pendingLedger) ledger() (*evm.Ledger, error) {
	if l := p.ready.Load(); l != nil {
		return l, nil
	}
	return nil, fmt.Errorf("%s: %w", p.cfg.Chain, ErrChainStarting)
}

// Close releases the real ledger's connection once it exists.
func (p *pendingLedger) Close() {
	if l := p.ready.Load(); l != nil {
		l.Close()
	}
}

func (p *pendingLedger) Chain() chains.Name { return p.cfg.Chain }
func (p *pendingLedger) Token() string      { return p.token }

func (p *pendingLedger) Decimals() int32 {
	if l := p.ready.Load(); l != nil {
		return l.Decimals()
	}
	if p.cfg.Decimals == 0 {
		return 6
	}
	return p.cfg.Decimals
}

// ChainID is the node's chain id once started; before, the configured one
// (0 when any is accepted).
func (p *pendingLedger) ChainID() uint64 {
	if l := p.ready.Load(); l != nil {
		return l.ChainID()
	}
	return p.cfg.ChainID
}

func (p *pendingLedger) GasAddress() string { return p.gasAddr }

func (p *pendingLedger) ValidateAddress(address string) error { return evm.ValidateAddress(address) }

func (p *pendingLedger) Head(ctx context.Context) (uint64, error) {
	l, err := p.ledger()
	if err != nil {
		return 0, err
	}
	return l.Head(ctx)
}

func (p *pendingLedger) Balance(ctx context.Context, address string) (*big.Int, error) {
	l, err := p.ledger()
	if err != nil {
		return nil, err
	}
	return l.Balance(ctx, address)
}

// Transfer before the start is refused: nothing was broadcast.
func (p *pendingLedger) Transfer(ctx context.Context, req chains.TransferRequest) (chains.Submitted, error) {
	l, err := p.ledger()
	if err != nil {
		return chains.Submitted{}, chains.Mark(err, chains.ErrRefused)
	}
	return l.Transfer(ctx, req)
}

func (p *pendingLedger) Receipt(ctx context.Context, txHash string) (chains.Receipt, error) {
	l, err := p.ledger()
	if err != nil {
		return chains.Receipt{}, err
	}
	return l.Receipt(ctx, txHash)
}

// Wait waits for the start too: a caller waiting on a transaction waits
// until the chain can tell.
func (p *pendingLedger) Wait(ctx context.Context, txHash string) (chains.Receipt, error) {
	select {
	case <-p.started:
	case <-ctx.Done():
		return chains.Receipt{}, ctx.Err()
	}
	return p.ready.Load().Wait(ctx, txHash)
}

func (p *pendingLedger) FindTransfer(ctx context.Context, q chains.TransferQuery) (string, bool, error) {
	l, err := p.ledger()
	if err != nil {
		return "", false, err
	}
	return l.FindTransfer(ctx, q)
}

func (p *pendingLedger) TxFee(ctx context.Context, txHash string) (*big.Int, int32, error) {
	l, err := p.ledger()
	if err != nil {
		return nil, 0, err
	}
	return l.TxFee(ctx, txHash)
}

func (p *pendingLedger) TxCost(ctx context.Context, txHash string) (chains.TxCost, error) {
	l, err := p.ledger()
	if err != nil {
		return chains.TxCost{}, err
	}
	return l.TxCost(ctx, txHash)
}

func (p *pendingLedger) DepositsIn(ctx context.Context, txHash, to string) ([]chains.Deposit, error) {
	l, err := p.ledger()
	if err != nil {
		return nil, err
	}
	return l.DepositsIn(ctx, txHash, to)
}

func (p *pendingLedger) TokenDomain(ctx context.Context) (chains.TokenDomain, error) {
	l, err := p.ledger()
	if err != nil {
		return chains.TokenDomain{}, err
	}
	return l.TokenDomain(ctx)
}

func (p *pendingLedger) VerifyAuthorization(ctx context.Context, a chains.Authorization) error {
	l, err := p.ledger()
	if err != nil {
		return err
	}
	return l.VerifyAuthorization(ctx, a)
}

// RelayAuthorization before the start is refused: nothing was broadcast.
func (p *pendingLedger) RelayAuthorization(ctx context.Context, a chains.Authorization) (chains.Submitted, error) {
	l, err := p.ledger()
	if err != nil {
		return chains.Submitted{}, chains.Mark(err, chains.ErrRefused)
	}
	return l.RelayAuthorization(ctx, a)
}

// newWatcher builds the deposit watcher once the chain has started; before,
// the scan job fails with ErrChainStarting and River runs it again.
func (p *pendingLedger) newWatcher(ctx context.Context, st chains.WatcherState) (chains.Watcher, error) {
	l, err := p.ledger()
	if err != nil {
		return nil, err
	}
	return l.NewWatcher(ctx, st)
}
