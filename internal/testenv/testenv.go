package testenv

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"math/big"
	"sync"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	solanago "github.com/gagliardetto/solana-go"
	"github.com/riverqueue/river"

	"agentpay/chains"
	"agentpay/chains/adapters"
	"agentpay/chains/devnet"
	"agentpay/ent"
	"agentpay/ent/funding"
	"agentpay/internal/clock"
	"agentpay/internal/store"
	"agentpay/internal/testdb"
	"agentpay/internal/treasury"
	"agentpay/internal/vault"
)

// The service's public URLs in tests (Config.BaseURL, PayURL, AppURL):
// never reached, only written into answers.
const (
	BaseURL = "http://api.test"
	PayURL  = "http://pay.test"
	AppURL  = "http://app.test"
	// PasskeyRPID is the passkeys' relying party id: AppURL's host.
	PasskeyRPID = "app.test"
)

// Devnet timings: short, so a test waits little for blocks, slots and
// inclusions.
const (
	solanaSlotTime       = 50 * time.Millisecond
	solanaFinalizedDepth = 8
	evmPollInterval      = 20 * time.Millisecond
	solanaPollInterval   = 50 * time.Millisecond
	startTimeout         = 2 * time.Minute
)

// Options say what a test's Env has beyond a database, a vault and the
// treasury. The zero value is a fresh database, a fresh vault and no chains.
type Options struct {
	// DB is the database to use, for a second instance on a test's
	// database (testdb.Reopen for one with its own pool, as another
	// process); nil opens a fresh one.
	DB *store.DB
	// NoDB leaves Env.DB nil: for tests whose processes create and migrate
	// their own database, and for rules that read none.
	NoDB bool
	// Vault is the vault to use (instances sharing one MASTER_KEY); nil
	// makes one on a fresh master key.
	Vault *vault.Vault

	// Chains are the devnets started with the Env (concurrently), which
	// make test mode's networks (Env.Test); AddChain starts more later.
	Chains []chains.Name
	// BlockTime is the EVM devnets' block interval; 0 means blocks come
	// only from Commit (and from the faucet's sends, which seal their own),
	// so the test decides when a deposit gains confirmations.
	BlockTime time.Duration
	// Confirmations a deposit needs, per chain (the adapter's setting and
	// chains.Network.Confirmations); a chain not listed has the adapter's
	// default and 0 in the Network.
	Confirmations map[chains.Name]uint64
	// SolanaGenesisHash is the genesis hash the Solana devnet answers,
	// which names its cluster (x402 offers Solana on the cluster the node
	// is on); "" is the public devnet's (devnet.SolanaDevnetGenesisHash),
	// which test mode is offered on.
	SolanaGenesisHash string

	// Jobs asks for Env.Jobs, the insert-only River client the API
	// processes enqueue with. Every Env with a database has it now (a
	// merchant's registration mails its contact e-mail through the outbox,
	// which needs it), so the option only says a test relies on it.
	Jobs bool
	// Clock, when set, makes Env.Clock a stub clock reading it.
	Clock time.Time
	// PublicWebhooksOnly keeps Fill from turning on WebhookAllowPrivate:
	// for tests of where deliveries may not go.
	PublicWebhooksOnly bool
}

// Env is a test's bundle. Its exported fields are named after the
// agentpay.Config fields they fill.
type Env struct {
	tb   testing.TB
	opts Options

	// MasterKey is the vault's master key when New made the vault (nil
	// when Options.Vault was given): the MASTER_KEY of a process under test.
	MasterKey []byte
	Vault     *vault.Vault
	Treasury  treasury.Keys
	Families  chains.Families
	DB        *store.DB
	Logger    *slog.Logger
	// Jobs is an insert-only River client on DB (nil without a database).
	Jobs *river.Client[*sql.Tx]
	// Clock is nil (the system clock) unless Options.Clock.
	Clock *clock.Stub
	// Test is test mode's networks: one per devnet started. AddChain
	// replaces the map rather than changing it, so a service built before
	// keeps the networks it was given.
	Test chains.Networks

	mu  sync.Mutex
	evm map[chains.Name]*devnet.EVM
	sol *devnet.Solana
}

// New builds a test's Env; everything it starts stops when the test ends.
func New(tb testing.TB, opts Options) *Env {
	tb.Helper()
	e := &Env{
		tb: tb, opts: opts,
		Vault:    opts.Vault,
		Families: adapters.Families(),
		Logger:   slog.New(slog.NewTextHandler(io.Discard, nil)),
		Test:     chains.Networks{},
		evm:      map[chains.Name]*devnet.EVM{},
	}
	if e.Vault == nil {
		key, err := vault.GenerateMasterKey()
		if err != nil {
			tb.Fatalf("testenv: master key: %v", err)
		}
		if e.Vault, err = vault.New(key); err != nil {
			tb.Fatalf("testenv: vault: %v", err)
		}
		e.MasterKey = key
	}
	var err error
	if e.Treasury, err = treasury.Derive(e.Vault, e.Families); err != nil {
		tb.Fatalf("testenv: %v", err)
	}
	switch {
	case opts.DB != nil:
		e.DB = opts.DB
	case !opts.NoDB:
		e.DB = testdb.Open(tb)
	}
	switch {
	case e.DB != nil:
		e.Jobs = testdb.InsertOnlyRiver(tb, e.DB)
	case opts.Jobs:
		tb.Fatal("testenv: Options.Jobs needs a database")
	}
	if !opts.Clock.IsZero() {
		e.Clock = clock.NewStub(opts.Clock)
	}
	e.AddChain(opts.Chains...)
	return e
}

// AddChain starts a devnet for each chain, concurrently, funds the treasury
// with gas on it and adds the chain to Env.Test, wired as cmd/agentpay
// wires a configured chain (chains/adapters.Network, the treasury's gas key).
func (e *Env) AddChain(names ...chains.Name) {
	e.tb.Helper()
	if len(names) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	nets := make([]chains.Network, len(names))
	errs := make([]error, len(names))
	var wg sync.WaitGroup
	for i, name := range names {
		if _, ok := e.Test[name]; ok {
			e.tb.Fatalf("testenv: %s already has a devnet", name)
		}
		wg.Go(func() { nets[i], errs[i] = e.startChain(ctx, name) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		e.tb.Fatalf("testenv: %v", err)
	}
	test := maps.Clone(e.Test)
	for i, name := range names {
		test[name] = nets[i]
	}
	e.Test = test
}

// startChain starts name's devnet and connects its network; both close when
// the test ends, the network first.
func (e *Env) startChain(ctx context.Context, name chains.Name) (chains.Network, error) {
	c := adapters.Chain{Confirmations: e.opts.Confirmations[name], GasKey: e.Treasury.Key(name)}
	if name == chains.Solana {
		s, err := devnet.StartSolana(ctx, devnet.SolanaConfig{
			SlotTime: solanaSlotTime, FinalizedDepth: solanaFinalizedDepth,
			Fund:        []solanago.PublicKey{solanago.MustPublicKeyFromBase58(e.Treasury.SolanaAddress)},
			GenesisHash: cmp.Or(e.opts.SolanaGenesisHash, devnet.SolanaDevnetGenesisHash),
		})
		if err != nil {
			return chains.Network{}, fmt.Errorf("devnet %s: %w", name, err)
		}
		e.tb.Cleanup(func() { _ = s.Close() })
		e.mu.Lock()
		e.sol = s
		e.mu.Unlock()
		c.RPCURL, c.USDC, c.PollInterval = s.RPCURL, s.Mint.String(), solanaPollInterval
	} else {
		d, err := devnet.StartEVM(ctx, devnet.EVMConfig{
			Chain: name, BlockTime: e.opts.BlockTime,
			Fund: []common.Address{common.HexToAddress(e.Treasury.EVMAddress)},
		})
		if err != nil {
			return chains.Network{}, fmt.Errorf("devnet %s: %w", name, err)
		}
		e.tb.Cleanup(func() { _ = d.Close() })
		e.mu.Lock()
		e.evm[name] = d
		e.mu.Unlock()
		c.RPCURL, c.USDC, c.PollInterval = d.RPCURL, d.USDC.Hex(), evmPollInterval
	}
	n, err := adapters.Network(ctx, name, c)
	if err != nil {
		return chains.Network{}, err
	}
	if l, ok := n.Ledger.(interface{ Close() }); ok {
		e.tb.Cleanup(l.Close)
	}
	return n, nil
}

// EVM is the devnet of an EVM chain the Env started.
func (e *Env) EVM(name chains.Name) *devnet.EVM {
	e.tb.Helper()
	e.mu.Lock()
	defer e.mu.Unlock()
	d, ok := e.evm[name]
	if !ok {
		e.tb.Fatalf("testenv: no %s devnet: ask for it in Options.Chains or AddChain", name)
	}
	return d
}

// Solana is the Solana devnet the Env started.
func (e *Env) Solana() *devnet.Solana {
	e.tb.Helper()
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.sol == nil {
		e.tb.Fatal("testenv: no solana devnet: ask for it in Options.Chains or AddChain")
	}
	return e.sol
}

// Ledger is test mode's ledger of chain.
func (e *Env) Ledger(chain chains.Name) chains.Ledger {
	e.tb.Helper()
	n, ok := e.Test[chain]
	if !ok {
		e.tb.Fatalf("testenv: no %s network", chain)
	}
	return n.Ledger
}

// Fund sends units base units of USDC to address on chain from the
// devnet's faucet and returns once the transfer is included, so a balance
// read right after shows it.
func (e *Env) Fund(tb testing.TB, chain chains.Name, address string, units int64) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var (
		err  error
		hash string
	)
	if chain == chains.Solana {
		var to solanago.PublicKey
		if to, err = solanago.PublicKeyFromBase58(address); err == nil {
			var sig solanago.Signature
			sig, err = e.Solana().Send(ctx, to, uint64(units))
			hash = sig.String()
		}
	} else {
		var h common.Hash
		h, err = e.EVM(chain).Send(ctx, common.HexToAddress(address), big.NewInt(units))
		hash = h.Hex()
	}
	if err != nil {
		tb.Fatalf("testenv: funding %s on %s: %v", address, chain, err)
	}
	// The faucet records what it paid, as agentpay dev's does
	// (agentpay.Service.RecordFunding), so the books count it.
	if e.DB != nil {
		if c, err := e.Families[chain.Family()].ParseAddress(address); err == nil {
			address = c // canonical, as the scan records it
		}
		err := e.DB.Ent.Funding.Create().SetChain(string(chain)).SetMode(funding.ModeTest).SetAddress(address).
			SetAmount(units).SetTxHash(hash).SetSource("faucet").Exec(ctx)
		if err != nil && !ent.IsConstraintError(err) {
			tb.Fatalf("testenv: recording the funding of %s on %s: %v", address, chain, err)
		}
	}
}

// Balance is address's USDC on chain, in base units, read through test
// mode's ledger.
func (e *Env) Balance(tb testing.TB, chain chains.Name, address string) *big.Int {
	tb.Helper()
	b, err := e.Ledger(chain).Balance(context.Background(), address)
	if err != nil {
		tb.Fatalf("testenv: balance of %s on %s: %v", address, chain, err)
	}
	return b
}
