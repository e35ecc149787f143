// Package devnet runs local chains for `agentpay dev` and for tests: real
// block production, real transactions and real RPC, in process and in memory,
// so the chain adapters are exercised exactly as against a public network.
package devnet

import (
	"context"
	"crypto/ecdsa"
	"errors"
	"fmt"
	"maps"
	"math/big"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/ethereum/go-ethereum"
	"github.com/ethereum/go-ethereum/accounts/abi/bind"
	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/crypto"
	"github.com/ethereum/go-ethereum/eth"
	"github.com/ethereum/go-ethereum/eth/catalyst"
	"github.com/ethereum/go-ethereum/eth/ethconfig"
	"github.com/ethereum/go-ethereum/eth/filters"
	"github.com/ethereum/go-ethereum/ethclient"
	"github.com/ethereum/go-ethereum/ethclient/simulated"
	"github.com/ethereum/go-ethereum/node"
	"github.com/ethereum/go-ethereum/p2p"
	"github.com/ethereum/go-ethereum/params"
	"github.com/ethereum/go-ethereum/rpc"

	"agentpay/chains"
	"agentpay/chains/devnet/usdc"
)

// DefaultChainIDs are the chain ids devnets use when EVMConfig.ChainID is 0:
// each chain's public testnet id, so signatures and addresses a wallet shows
// look like the test network the chain stands in for (and never a mainnet's,
// so a devnet signature can never be replayed on a real chain).
var DefaultChainIDs = map[chains.Name]uint64{
	chains.Base:     84532,    // Base Sepolia
	chains.Arbitrum: 421614,   // Arbitrum Sepolia
	chains.Ethereum: 11155111, // Sepolia
	chains.Polygon:  80002,    // Polygon Amoy
}

var (
	// NativeFunding is what every EVMConfig.Fund account and the payer hold
	// at genesis: 1,000,000 coins of 18 decimals, far more gas than any test
	// or dev session spends.
	NativeFunding = new(big.Int).Mul(big.NewInt(1_000_000), big.NewInt(params.Ether))

	// PayerUSDC is the payer's USDC at start, in base units (10^9 USDC).
	PayerUSDC = new(big.Int).Exp(big.NewInt(10), big.NewInt(15), nil)
)

// ErrClosed is returned by calls on a devnet after Close.
var ErrClosed = errors.New("devnet: closed")

// EVMConfig configures one local EVM chain.
type EVMConfig struct {
	// Chain is the EVM chain the devnet stands in for.
	Chain chains.Name

	// ChainID overrides the chain id; 0 means DefaultChainIDs[Chain].
	ChainID uint64

	// BlockTime is the interval between blocks. 0 means blocks are produced
	// only by Commit (and by Send and Mint, which commit their own block so
	// they still return once included).
	//
	// Block timestamps are wall-clock seconds but always at least one second
	// after the parent's, as on Ethereum. So blocks more often than once a
	// second (or bursts of Commit) run the chain's clock ahead of wall time
	// by up to a second per block; EIP-3009 validity windows are judged by
	// the chain's clock.
	BlockTime time.Duration

	// Fund lists accounts given NativeFunding at genesis (gas wallets, the
	// treasury), so they can pay gas from the first block.
	Fund []common.Address

	// ListenAddr is the loopback host:port serving JSON-RPC over HTTP and
	// websocket on the same port. "" means "127.0.0.1:0": any free port.
	ListenAddr string
}

// EVM is a running local EVM chain with the USDC token deployed.
type EVM struct {
	Chain   chains.Name
	ChainID uint64
	// RPCURL is the JSON-RPC HTTP endpoint, http://127.0.0.1:PORT.
	RPCURL string
	// WSURL is the JSON-RPC websocket endpoint on the same port, ws://127.0.0.1:PORT.
	WSURL string
	// USDC is the token contract.
	USDC common.Address
	// Payer is the dev payer and faucet: it deployed and owns the token,
	// holds NativeFunding and starts with PayerUSDC. Its key is derived from
	// the chain id, so the token has the same address on every start.
	Payer *ecdsa.PrivateKey

	blockTime time.Duration
	node      *node.Node
	beacon    *catalyst.SimulatedBeacon
	client    *ethclient.Client
	token     *usdc.USDC
	payer     common.Address

	// mu serialises block production (the ticker, Commit, Fork): the
	// simulated beacon is not safe for concurrent sealing.
	mu sync.Mutex
	// newBlock is closed and replaced after each block, waking the
	// goroutines waiting for a transaction's inclusion. Guarded by mu.
	newBlock chan struct{}

	// sendMu keeps the payer's nonces in order across concurrent Send and
	// Mint calls: the nonce is chosen and the transaction pooled under it.
	sendMu sync.Mutex
	// nextNonce is the payer's next nonce as far as this process knows.
	// The pool's pending nonce alone is not enough: it catches up with a
	// just-pooled transaction asynchronously, so two quick sends would get
	// the same nonce. Guarded by sendMu.
	nextNonce uint64

	closeOnce sync.Once
	closeErr  error
	closed    chan struct{}
	tickerWG  sync.WaitGroup
}

// StartEVM starts a devnet, deploys the USDC token and funds the payer.
// ctx bounds the start only; the devnet runs until Close.
func StartEVM(ctx context.Context, cfg EVMConfig) (*EVM, error) {
	if !cfg.Chain.IsEVM() {
		return nil, fmt.Errorf("devnet: %q is not an EVM chain", cfg.Chain)
	}
	chainID := cfg.ChainID
	if chainID == 0 {
		chainID = DefaultChainIDs[cfg.Chain]
	}
	if cfg.BlockTime < 0 {
		return nil, fmt.Errorf("devnet: negative block time %s", cfg.BlockTime)
	}
	listen := cfg.ListenAddr
	if listen == "" {
		listen = "127.0.0.1:0"
	}
	host, portStr, err := net.SplitHostPort(listen)
	if err != nil {
		return nil, fmt.Errorf("devnet: listen address %q: %w", listen, err)
	}
	port, err := strconv.Atoi(portStr)
	if err != nil || port < 0 || port > 65535 {
		return nil, fmt.Errorf("devnet: listen address %q: bad port", listen)
	}
	if host == "" {
		// An empty host would disable the HTTP server altogether in
		// go-ethereum's node; a devnet is for this machine only.
		host = "127.0.0.1"
	}

	payerKey, err := payerKey(chainID)
	if err != nil {
		return nil, err
	}
	payer := crypto.PubkeyToAddress(payerKey.PublicKey)

	e := &EVM{
		Chain:     cfg.Chain,
		ChainID:   chainID,
		Payer:     payerKey,
		blockTime: cfg.BlockTime,
		payer:     payer,
		newBlock:  make(chan struct{}),
		closed:    make(chan struct{}),
	}
	if err := e.startNode(host, port, cfg.Fund); err != nil {
		_ = e.Close()
		return nil, err
	}
	if err := e.deployToken(ctx); err != nil {
		_ = e.Close()
		return nil, err
	}
	if cfg.BlockTime > 0 {
		e.tickerWG.Add(1)
		go e.tick()
	}
	return e, nil
}

// payerKey derives the payer's key from the chain id. A fixed, public key is
// fine on a throwaway in-memory chain and keeps the token's address (the
// payer's first contract) stable across restarts, so wallets configured
// against a devnet keep working.
func payerKey(chainID uint64) (*ecdsa.PrivateKey, error) {
	seed := crypto.Keccak256([]byte("agentpay devnet payer " + strconv.FormatUint(chainID, 10)))
	key, err := crypto.ToECDSA(seed)
	if err != nil {
		return nil, fmt.Errorf("devnet: payer key: %w", err)
	}
	return key, nil
}

// startNode assembles what simulated.NewBackend does, but keeps the node so
// its real HTTP endpoint (port 0 resolved) is known, and with our chain id.
func (e *EVM) startNode(host string, port int, fund []common.Address) error {
	nodeConf := node.DefaultConfig
	nodeConf.DataDir = "" // in memory
	nodeConf.P2P = p2p.Config{NoDiscovery: true}
	nodeConf.HTTPHost = host
	nodeConf.HTTPPort = port
	nodeConf.HTTPModules = []string{"eth", "net", "web3"}
	// Browser wallets and the hosted checkout page talk to the devnet from
	// other origins.
	nodeConf.HTTPCors = []string{"*"}
	// Same host and port as HTTP: go-ethereum serves both on one listener.
	nodeConf.WSHost = host
	nodeConf.WSPort = port
	nodeConf.WSModules = nodeConf.HTTPModules
	nodeConf.WSOrigins = []string{"*"}

	chainConfig := *params.AllDevChainProtocolChanges
	chainConfig.ChainID = new(big.Int).SetUint64(e.ChainID)

	alloc := core.SystemContractAllocs()
	maps.Copy(alloc, types.GenesisAlloc{e.payer: {Balance: NativeFunding}})
	for _, a := range fund {
		alloc[a] = types.Account{Balance: NativeFunding}
	}

	ethConf := ethconfig.Defaults
	ethConf.Genesis = &core.Genesis{
		Config:   &chainConfig,
		GasLimit: ethconfig.Defaults.Miner.GasCeil,
		Alloc:    alloc,
		// Wall-clock genesis rather than 1970, so block times (and with them
		// EIP-3009 validity windows) look like a live chain's from block 1.
		Timestamp: uint64(time.Now().Unix()) - 1,
	}
	ethConf.SyncMode = ethconfig.FullSync
	ethConf.TxPool.NoLocals = true
	// As simulated.NewBackend: no background log indexer; eth_getLogs scans.
	ethConf.LogNoHistory = true

	stack, err := node.New(&nodeConf)
	if err != nil {
		return fmt.Errorf("devnet: node: %w", err)
	}
	e.node = stack
	backend, err := eth.New(stack, &ethConf)
	if err != nil {
		return fmt.Errorf("devnet: eth service: %w", err)
	}
	// eth_getLogs and the filter methods live outside the eth service.
	filterSystem := filters.NewFilterSystem(backend.APIBackend, filters.Config{})
	stack.RegisterAPIs([]rpc.API{{Namespace: "eth", Service: filters.NewFilterAPI(filterSystem)}})
	if err := stack.Start(); err != nil {
		return fmt.Errorf("devnet: start node on %s: %w", net.JoinHostPort(host, strconv.Itoa(port)), err)
	}
	// Period 0 and never Start()ed: the beacon seals only when asked, so
	// block production is ours (ticker, Commit) and serialised by mu.
	beacon, err := catalyst.NewSimulatedBeacon(0, common.Address{}, backend)
	if err != nil {
		return fmt.Errorf("devnet: beacon: %w", err)
	}
	e.beacon = beacon
	if err := beacon.Fork(backend.BlockChain().GetCanonicalHash(0)); err != nil {
		return fmt.Errorf("devnet: beacon: %w", err)
	}
	e.client = ethclient.NewClient(stack.Attach())
	e.RPCURL = stack.HTTPEndpoint()
	e.WSURL = stack.WSEndpoint()
	return nil
}

// deployToken deploys USDC from the payer and mints PayerUSDC to it.
func (e *EVM) deployToken(ctx context.Context) error {
	auth, err := e.transactor(ctx)
	if err != nil {
		return err
	}
	addr, tx, token, err := usdc.DeployUSDC(auth, e.client)
	if err != nil {
		return fmt.Errorf("devnet: deploy USDC: %w", err)
	}
	// The mint's gas cannot be estimated before the contract exists, so the
	// deployment gets its own block first (a few milliseconds).
	e.commit()
	if _, err := e.waitIncluded(ctx, tx.Hash()); err != nil {
		return fmt.Errorf("devnet: deploy USDC: %w", err)
	}
	e.USDC = addr
	e.token = token
	// The ticker has not started yet: commit the mint's block here.
	if _, err := e.sendAndWait(ctx, true, func(auth *bind.TransactOpts) (*types.Transaction, error) {
		return e.token.Mint(auth, e.payer, PayerUSDC)
	}); err != nil {
		return fmt.Errorf("devnet: mint to payer: %w", err)
	}
	return nil
}

func (e *EVM) transactor(ctx context.Context) (*bind.TransactOpts, error) {
	auth, err := bind.NewKeyedTransactorWithChainID(e.Payer, new(big.Int).SetUint64(e.ChainID))
	if err != nil {
		return nil, fmt.Errorf("devnet: transactor: %w", err)
	}
	auth.Context = ctx
	return auth, nil
}

// tick produces a block every BlockTime until Close.
func (e *EVM) tick() {
	defer e.tickerWG.Done()
	t := time.NewTicker(e.blockTime)
	defer t.Stop()
	for {
		select {
		case <-e.closed:
			return
		case <-t.C:
			e.commit()
		}
	}
}

// Client is an in-process client of the devnet: no HTTP, for tests and the
// dev process itself.
func (e *EVM) Client() simulated.Client { return e.client }

// Commit seals a block with the pooled transactions now, alongside the
// ticker if one runs, and returns the new head's hash.
func (e *EVM) Commit() common.Hash { return e.commit() }

func (e *EVM) commit() common.Hash {
	e.mu.Lock()
	defer e.mu.Unlock()
	select {
	case <-e.closed:
		return common.Hash{}
	default:
	}
	h := e.beacon.Commit()
	close(e.newBlock)
	e.newBlock = make(chan struct{})
	return h
}

// AdjustTime seals an empty block d after the head's timestamp, as on a
// chain whose clock runs ahead of this machine's; it fails while
// transactions are pooled (simulated beacon).
func (e *EVM) AdjustTime(d time.Duration) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	select {
	case <-e.closed:
		return ErrClosed
	default:
	}
	if err := e.beacon.AdjustTime(d); err != nil {
		return err
	}
	close(e.newBlock)
	e.newBlock = make(chan struct{})
	return nil
}

// Fork makes parent the head, dropping its descendants from the canonical
// chain, as simulated.Backend.Fork: it fails while transactions are pooled.
// Transactions of the dropped blocks return to the pool, so the next blocks
// include them again (in new blocks, with new hashes), as after a real reorg.
func (e *EVM) Fork(parent common.Hash) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	select {
	case <-e.closed:
		return ErrClosed
	default:
	}
	return e.beacon.Fork(parent)
}

// Mint creates amount base units of USDC for to, as the token owner, and
// returns the transaction hash once included.
func (e *EVM) Mint(ctx context.Context, to common.Address, amount *big.Int) (common.Hash, error) {
	if amount == nil || amount.Sign() <= 0 {
		return common.Hash{}, fmt.Errorf("devnet: mint amount must be positive, got %v", amount)
	}
	gas, err := e.gasWithMargin(ctx, "mint", to, amount)
	if err != nil {
		return common.Hash{}, err
	}
	return e.sendAndWait(ctx, e.blockTime == 0, func(auth *bind.TransactOpts) (*types.Transaction, error) {
		auth.GasLimit = gas
		return e.token.Mint(auth, to, amount)
	})
}

// Send transfers amount base units of USDC from the payer to `to` with a
// plain ERC-20 transfer (the faucet) and returns the transaction hash once
// included, so a balance read right after shows it. A zero amount sends a
// zero-value transfer, which anyone can send to any address (tests use it).
func (e *EVM) Send(ctx context.Context, to common.Address, amount *big.Int) (common.Hash, error) {
	if amount == nil || amount.Sign() < 0 {
		return common.Hash{}, fmt.Errorf("devnet: send amount must not be negative, got %v", amount)
	}
	gas, err := e.gasWithMargin(ctx, "transfer", to, amount)
	if err != nil {
		return common.Hash{}, err
	}
	return e.sendAndWait(ctx, e.blockTime == 0, func(auth *bind.TransactOpts) (*types.Transaction, error) {
		auth.GasLimit = gas
		return e.token.Transfer(auth, to, amount)
	})
}

// gasWithMargin is the payer's gas estimate for calling the token's method,
// plus half. The estimate is of the state now; a transaction of someone
// else included first can make the call dearer (a sweep emptying the
// recipient's balance makes crediting it a new storage slot again), and
// with the bare estimate the faucet's transfer would run out of gas and
// revert. An estimate that fails is the dry run refusing the call.
func (e *EVM) gasWithMargin(ctx context.Context, method string, args ...any) (uint64, error) {
	select {
	case <-e.closed:
		return 0, ErrClosed
	default:
	}
	parsed, err := usdc.USDCMetaData.GetAbi()
	if err != nil {
		return 0, fmt.Errorf("devnet: token ABI: %w", err)
	}
	data, err := parsed.Pack(method, args...)
	if err != nil {
		return 0, fmt.Errorf("devnet: packing %s: %w", method, err)
	}
	gas, err := e.client.EstimateGas(ctx, ethereum.CallMsg{From: e.payer, To: &e.USDC, Data: data})
	if err != nil {
		return 0, fmt.Errorf("devnet: %s: failed to estimate gas needed: %w", method, err)
	}
	return gas + gas/2, nil
}

// EVMToken is another token on a devnet beside its USDC, of the same
// contract (so the same decimals, events and EIP-3009 authorizations) and
// owned by the payer: what tests use as a token that is not the chain's
// USDC.
type EVMToken struct {
	Address common.Address
	e       *EVM
	token   *usdc.USDC
}

// DeployToken deploys another token and returns once it is included.
func (e *EVM) DeployToken(ctx context.Context) (*EVMToken, error) {
	t := &EVMToken{e: e}
	_, err := e.sendAndWait(ctx, e.blockTime == 0, func(auth *bind.TransactOpts) (*types.Transaction, error) {
		addr, tx, token, err := usdc.DeployUSDC(auth, e.client)
		t.Address, t.token = addr, token
		return tx, err
	})
	if err != nil {
		return nil, fmt.Errorf("devnet: deploy token: %w", err)
	}
	return t, nil
}

// Mint creates amount base units of the token for to and returns the
// transaction hash once included.
func (t *EVMToken) Mint(ctx context.Context, to common.Address, amount *big.Int) (common.Hash, error) {
	return t.e.sendAndWait(ctx, t.e.blockTime == 0, func(auth *bind.TransactOpts) (*types.Transaction, error) {
		return t.token.Mint(auth, to, amount)
	})
}

// sendAndWait pools a payer transaction and waits for its block; with
// commit set (no ticker, or the ticker not started yet) it seals that block
// itself.
func (e *EVM) sendAndWait(ctx context.Context, commit bool, send func(*bind.TransactOpts) (*types.Transaction, error)) (common.Hash, error) {
	select {
	case <-e.closed:
		return common.Hash{}, ErrClosed
	default:
	}
	tx, err := e.pool(ctx, send)
	if err != nil {
		return common.Hash{}, err
	}
	if commit {
		// The pool takes a sent transaction in asynchronously: under load a
		// block sealed at once may miss it, so seal until it is included.
		for range 100 {
			e.commit()
			if r, err := e.client.TransactionReceipt(ctx, tx.Hash()); err == nil && r != nil {
				break
			}
			select {
			case <-ctx.Done():
				return tx.Hash(), ctx.Err()
			case <-time.After(5 * time.Millisecond):
			}
		}
	}
	_, err = e.waitIncluded(ctx, tx.Hash())
	return tx.Hash(), err
}

// pool signs a payer transaction with the next nonce and adds it to the pool.
func (e *EVM) pool(ctx context.Context, send func(*bind.TransactOpts) (*types.Transaction, error)) (*types.Transaction, error) {
	auth, err := e.transactor(ctx)
	if err != nil {
		return nil, err
	}
	e.sendMu.Lock()
	defer e.sendMu.Unlock()
	nonce, err := e.client.PendingNonceAt(ctx, e.payer)
	if err != nil {
		return nil, fmt.Errorf("devnet: payer nonce: %w", err)
	}
	// The pool's view still wins when ahead, e.g. if a test sent from the
	// payer key itself.
	nonce = max(nonce, e.nextNonce)
	auth.Nonce = new(big.Int).SetUint64(nonce)
	tx, err := send(auth)
	if err != nil {
		return nil, fmt.Errorf("devnet: send: %w", err)
	}
	e.nextNonce = nonce + 1
	return tx, nil
}

// waitIncluded blocks until the transaction is in a block, then reports a
// revert as an error. It wakes on each new block rather than polling.
func (e *EVM) waitIncluded(ctx context.Context, hash common.Hash) (*types.Receipt, error) {
	for {
		// Take the signal before looking, so a block sealed in between is not missed.
		e.mu.Lock()
		next := e.newBlock
		e.mu.Unlock()

		receipt, err := e.client.TransactionReceipt(ctx, hash)
		switch {
		case err == nil && receipt.Status == types.ReceiptStatusSuccessful:
			return receipt, nil
		case err == nil:
			return receipt, fmt.Errorf("devnet: transaction %s reverted in block %d", hash, receipt.BlockNumber)
		case !errors.Is(err, ethereum.NotFound) && !strings.Contains(err.Error(), "transaction indexing is in progress"):
			return nil, fmt.Errorf("devnet: receipt of %s: %w", hash, err)
		}
		select {
		case <-next:
		case <-ctx.Done():
			return nil, fmt.Errorf("devnet: waiting for %s: %w", hash, ctx.Err())
		case <-e.closed:
			return nil, ErrClosed
		}
	}
}

// Close stops block production and the node. The devnet's state is gone.
func (e *EVM) Close() error {
	e.closeOnce.Do(e.shutdown)
	return e.closeErr
}

func (e *EVM) shutdown() {
	e.mu.Lock()
	close(e.closed) // under mu: no commit runs on a stopped beacon
	e.mu.Unlock()
	e.tickerWG.Wait()

	if e.client != nil {
		e.client.Close()
	}
	var err error
	if e.beacon != nil {
		err = e.beacon.Stop()
	}
	if e.node != nil {
		err = errors.Join(err, e.node.Close())
	}
	e.closeErr = err
}
