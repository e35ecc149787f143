package devnet

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/gagliardetto/solana-go"
	"github.com/gagliardetto/solana-go/programs/system"
	"github.com/gagliardetto/solana-go/programs/token"
	"github.com/gagliardetto/solana-go/rpc"
)

// SolanaDecimals is the decimals of the devnet's USDC mint.
const SolanaDecimals = 6

// SolanaDevnetGenesisHash is the public Solana devnet's genesis hash, which
// a local devnet standing for it answers (SolanaConfig.GenesisHash).
const SolanaDevnetGenesisHash = "EtWTRABZaYq6iMfeYKouRu166VU2xqa1wcaWoxPkrZBG"

// SolanaConfig configures a local Solana devnet.
type SolanaConfig struct {
	// SlotTime is how often a slot passes (default 400ms).
	SlotTime time.Duration
	// FinalizedDepth is how many slots deep a transaction must be to be
	// finalized (default 32). Confirmed is one slot deep.
	FinalizedDepth int
	// SkipEvery, when 2 or more, makes every SkipEvery-th slot that no
	// transaction landed in produce no block, as real clusters skip slots:
	// getBlocks leaves it out and getBlock answers -32007. 0: none.
	SkipEvery int
	// Fund are airdropped 1,000 SOL each at start (fee payers, treasury).
	Fund []solana.PublicKey
	// Dir is the solana-rpc project directory; "" finds it next to this
	// source file, so tests work from any package.
	Dir string
	// GenesisHash is the genesis hash the devnet answers (base58 of 32
	// bytes), so it can stand for a public cluster (SolanaDevnetGenesisHash:
	// x402 clients know Solana's clusters by it); "" gives every devnet a
	// random one of its own.
	GenesisHash string
	// Node is the node executable (default "node" on PATH).
	Node string
	// Stderr receives the server's diagnostics; nil keeps only the last
	// lines, reported when it fails.
	Stderr io.Writer
}

// Solana is a running local Solana devnet: LiteSVM executing the real SPL
// Token and Associated Token Account programs behind the standard Solana
// JSON-RPC methods, in a node child process.
type Solana struct {
	RPCURL string
	// WSURL serves Solana PubSub (signature, account, logs, slot and root
	// subscriptions) on the same port.
	WSURL string
	Mint  solana.PublicKey
	// Payer is the dev payer: SOL and 10^15 USDC base units in its ATA.
	Payer solana.PrivateKey
	// MintAuthority can mint more of Mint.
	MintAuthority solana.PrivateKey

	cfg    SolanaConfig
	client *rpc.Client
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	stderr *tailBuffer
	exited chan struct{}

	mu      sync.Mutex // guards sends, the faucet memo counter
	sends   uint64
	closeMu sync.Once
	waitErr error
}

// StartSolana launches the devnet (`node server.js`) and returns once it
// serves, its mint and payer created. ctx bounds the start only; Close stops
// the process. The process also exits by itself if this one dies, since it
// watches its stdin.
func StartSolana(ctx context.Context, cfg SolanaConfig) (*Solana, error) {
	if cfg.SlotTime <= 0 {
		cfg.SlotTime = 400 * time.Millisecond
	}
	if cfg.FinalizedDepth <= 0 {
		cfg.FinalizedDepth = 32
	}
	if cfg.Node == "" {
		cfg.Node = "node"
	}
	if cfg.Dir == "" {
		_, file, _, ok := runtime.Caller(0)
		if !ok {
			return nil, errors.New("solana devnet: cannot locate the solana-rpc directory: set SolanaConfig.Dir")
		}
		cfg.Dir = filepath.Join(filepath.Dir(file), "solana-rpc")
	}
	if _, err := os.Stat(filepath.Join(cfg.Dir, "server.js")); err != nil {
		return nil, fmt.Errorf("solana devnet: %s is not the solana-rpc project: %w", cfg.Dir, err)
	}
	if _, err := os.Stat(filepath.Join(cfg.Dir, "node_modules", "litesvm")); err != nil {
		return nil, fmt.Errorf("solana devnet: %s has no node_modules: run npm ci in chains/devnet/solana-rpc", cfg.Dir)
	}
	nodePath, err := exec.LookPath(cfg.Node)
	if err != nil {
		return nil, fmt.Errorf("solana devnet: node (version 20 or later) is required: %w", err)
	}

	slotMS := cfg.SlotTime.Milliseconds()
	if slotMS < 1 {
		slotMS = 1
	}
	fund := make([]string, len(cfg.Fund))
	for i, k := range cfg.Fund {
		fund[i] = k.String()
	}
	args := []string{"server.js",
		"--port", "0",
		"--slot-ms", strconv.FormatInt(slotMS, 10),
		"--finalized-depth", strconv.Itoa(cfg.FinalizedDepth),
	}
	if cfg.SkipEvery > 0 {
		args = append(args, "--skip-every", strconv.Itoa(cfg.SkipEvery))
	}
	if len(fund) > 0 {
		args = append(args, "--fund", strings.Join(fund, ","))
	}
	if cfg.GenesisHash != "" {
		args = append(args, "--genesis-hash", cfg.GenesisHash)
	}

	cmd := exec.Command(nodePath, args...)
	cmd.Dir = cfg.Dir
	s := &Solana{cfg: cfg, cmd: cmd, stderr: &tailBuffer{max: 8 << 10}, exited: make(chan struct{})}
	if cfg.Stderr != nil {
		cmd.Stderr = io.MultiWriter(s.stderr, cfg.Stderr)
	} else {
		cmd.Stderr = s.stderr
	}
	if s.stdin, err = cmd.StdinPipe(); err != nil {
		return nil, fmt.Errorf("solana devnet: %w", err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, fmt.Errorf("solana devnet: %w", err)
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("solana devnet: start node: %w", err)
	}
	go func() {
		s.waitErr = cmd.Wait()
		close(s.exited)
	}()

	type hello struct {
		RPCURL              string `json:"rpc_url"`
		WSURL               string `json:"ws_url"`
		Mint                string `json:"mint"`
		PayerSecret         string `json:"payer_secret"`
		MintAuthoritySecret string `json:"mint_authority_secret"`
	}
	lines := make(chan string, 1)
	go func() {
		r := bufio.NewReader(stdout)
		line, _ := r.ReadString('\n')
		lines <- line
		_, _ = io.Copy(io.Discard, r)
	}()

	startCtx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	var line string
	select {
	case line = <-lines:
	case <-s.exited:
		return nil, fmt.Errorf("solana devnet: server exited before it was ready: %v: %s", s.waitErr, s.stderr.String())
	case <-startCtx.Done():
		_ = s.Close()
		return nil, fmt.Errorf("solana devnet: waiting for the server: %w: %s", startCtx.Err(), s.stderr.String())
	}
	var h hello
	if err := json.Unmarshal([]byte(line), &h); err != nil || h.RPCURL == "" {
		_ = s.Close()
		return nil, fmt.Errorf("solana devnet: unexpected first line %q: %s", strings.TrimSpace(line), s.stderr.String())
	}
	if s.Mint, err = solana.PublicKeyFromBase58(h.Mint); err != nil {
		_ = s.Close()
		return nil, fmt.Errorf("solana devnet: mint: %w", err)
	}
	if s.Payer, err = solana.PrivateKeyFromBase58(h.PayerSecret); err != nil {
		_ = s.Close()
		return nil, fmt.Errorf("solana devnet: payer key: %w", err)
	}
	if s.MintAuthority, err = solana.PrivateKeyFromBase58(h.MintAuthoritySecret); err != nil {
		_ = s.Close()
		return nil, fmt.Errorf("solana devnet: mint authority key: %w", err)
	}
	s.RPCURL = h.RPCURL
	s.WSURL = h.WSURL
	s.client = rpc.New(h.RPCURL)
	return s, nil
}

// Client is a solana-go RPC client for the devnet.
func (s *Solana) Client() *rpc.Client { return s.client }

// Send is the faucet: a TransferChecked of amount base units from Payer to
// the associated token account of `to` (created idempotently, Payer paying
// rent), sent through the RPC like any wallet would. It returns once the
// transaction is confirmed. A zero amount sends a zero-value transfer, which
// anyone holding a token account of the mint can send (tests use it).
func (s *Solana) Send(ctx context.Context, to solana.PublicKey, amount uint64) (solana.Signature, error) {
	sigs, err := s.SendAll(ctx, []solana.PublicKey{to}, amount)
	if len(sigs) == 0 {
		return solana.Signature{}, err
	}
	return sigs[0], err
}

// SendAll is Send to each of to, one transaction each: all are sent first,
// then it returns once every one is confirmed, so many transfers land in
// few slots (what scan tests and benchmarks need).
func (s *Solana) SendAll(ctx context.Context, to []solana.PublicKey, amount uint64) ([]solana.Signature, error) {
	payer := s.Payer.PublicKey()
	src, _, err := solana.FindAssociatedTokenAddress(payer, s.Mint)
	if err != nil {
		return nil, fmt.Errorf("solana devnet: send: %w", err)
	}
	bh, err := s.client.GetLatestBlockhash(ctx, rpc.CommitmentFinalized)
	if err != nil {
		return nil, fmt.Errorf("solana devnet: send: latest blockhash: %w", err)
	}
	sigs := make([]solana.Signature, 0, len(to))
	for _, owner := range to {
		dst, _, err := solana.FindAssociatedTokenAddress(owner, s.Mint)
		if err != nil {
			return sigs, fmt.Errorf("solana devnet: send: %w", err)
		}
		createATA := solana.NewInstruction(solana.SPLAssociatedTokenAccountProgramID, solana.AccountMetaSlice{
			solana.Meta(payer).WRITE().SIGNER(),
			solana.Meta(dst).WRITE(),
			solana.Meta(owner),
			solana.Meta(s.Mint),
			solana.Meta(solana.SystemProgramID),
			solana.Meta(solana.TokenProgramID),
		}, []byte{1}) // CreateIdempotent
		transfer, err := token.NewTransferCheckedInstruction(amount, SolanaDecimals, src, s.Mint, dst, payer, nil).ValidateAndBuild()
		if err != nil {
			return sigs, fmt.Errorf("solana devnet: send: %w", err)
		}
		// Two sends of the same amount to the same address in one slot would
		// be the same transaction; a memo with a counter keeps them distinct.
		s.mu.Lock()
		s.sends++
		memo := solana.NewInstruction(solana.MemoProgramID, solana.AccountMetaSlice{},
			[]byte("agentpay devnet faucet "+strconv.FormatUint(s.sends, 10)))
		s.mu.Unlock()
		tx, err := solana.NewTransaction([]solana.Instruction{createATA, transfer, memo}, bh.Value.Blockhash, solana.TransactionPayer(payer))
		if err != nil {
			return sigs, fmt.Errorf("solana devnet: send: %w", err)
		}
		if _, err := tx.Sign(func(k solana.PublicKey) *solana.PrivateKey {
			if k.Equals(payer) {
				return &s.Payer
			}
			return nil
		}); err != nil {
			return sigs, fmt.Errorf("solana devnet: send: sign: %w", err)
		}
		sig, err := s.client.SendTransactionWithOpts(ctx, tx, rpc.TransactionOpts{PreflightCommitment: rpc.CommitmentConfirmed})
		if err != nil {
			return sigs, fmt.Errorf("solana devnet: send: %w", err)
		}
		sigs = append(sigs, sig)
	}
	for _, sig := range sigs {
		if err := s.waitConfirmed(ctx, sig, bh.Value.LastValidBlockHeight); err != nil {
			return sigs, err
		}
	}
	return sigs, nil
}

// NewMint creates another mint of SolanaDecimals decimals, whose authority
// is MintAuthority: what tests use as a token that is not the devnet's USDC.
// It returns once the mint is confirmed.
func (s *Solana) NewMint(ctx context.Context) (solana.PublicKey, error) {
	mint, err := solana.NewRandomPrivateKey()
	if err != nil {
		return solana.PublicKey{}, fmt.Errorf("solana devnet: new mint: %w", err)
	}
	const mintSize = 82 // an SPL mint account
	rent, err := s.client.GetMinimumBalanceForRentExemption(ctx, mintSize, rpc.CommitmentConfirmed)
	if err != nil {
		return solana.PublicKey{}, fmt.Errorf("solana devnet: new mint: rent: %w", err)
	}
	create, err := system.NewCreateAccountInstruction(rent, mintSize, solana.TokenProgramID, s.Payer.PublicKey(), mint.PublicKey()).ValidateAndBuild()
	if err != nil {
		return solana.PublicKey{}, fmt.Errorf("solana devnet: new mint: %w", err)
	}
	init, err := token.NewInitializeMint2Instruction(SolanaDecimals, s.MintAuthority.PublicKey(), solana.PublicKey{}, mint.PublicKey()).ValidateAndBuild()
	if err != nil {
		return solana.PublicKey{}, fmt.Errorf("solana devnet: new mint: %w", err)
	}
	if _, err := s.submit(ctx, []solana.Instruction{create, init}, mint); err != nil {
		return solana.PublicKey{}, fmt.Errorf("solana devnet: new mint: %w", err)
	}
	return mint.PublicKey(), nil
}

// MintTo mints amount base units of a mint NewMint created to the
// associated token account of owner (created idempotently, Payer paying
// rent) and returns once confirmed.
func (s *Solana) MintTo(ctx context.Context, mint, owner solana.PublicKey, amount uint64) (solana.Signature, error) {
	ata, _, err := solana.FindAssociatedTokenAddress(owner, mint)
	if err != nil {
		return solana.Signature{}, fmt.Errorf("solana devnet: mint to: %w", err)
	}
	createATA := solana.NewInstruction(solana.SPLAssociatedTokenAccountProgramID, solana.AccountMetaSlice{
		solana.Meta(s.Payer.PublicKey()).WRITE().SIGNER(),
		solana.Meta(ata).WRITE(),
		solana.Meta(owner),
		solana.Meta(mint),
		solana.Meta(solana.SystemProgramID),
		solana.Meta(solana.TokenProgramID),
	}, []byte{1}) // CreateIdempotent
	mintTo, err := token.NewMintToCheckedInstruction(amount, SolanaDecimals, mint, ata, s.MintAuthority.PublicKey(), nil).ValidateAndBuild()
	if err != nil {
		return solana.Signature{}, fmt.Errorf("solana devnet: mint to: %w", err)
	}
	sig, err := s.submit(ctx, []solana.Instruction{createATA, mintTo}, s.MintAuthority)
	if err != nil {
		return sig, fmt.Errorf("solana devnet: mint to: %w", err)
	}
	return sig, nil
}

// submit sends instructions paid by Payer and signed by it and signers, and
// returns once the transaction is confirmed.
func (s *Solana) submit(ctx context.Context, instructions []solana.Instruction, signers ...solana.PrivateKey) (solana.Signature, error) {
	bh, err := s.client.GetLatestBlockhash(ctx, rpc.CommitmentFinalized)
	if err != nil {
		return solana.Signature{}, fmt.Errorf("latest blockhash: %w", err)
	}
	tx, err := solana.NewTransaction(instructions, bh.Value.Blockhash, solana.TransactionPayer(s.Payer.PublicKey()))
	if err != nil {
		return solana.Signature{}, err
	}
	keys := append([]solana.PrivateKey{s.Payer}, signers...)
	if _, err := tx.Sign(func(k solana.PublicKey) *solana.PrivateKey {
		for i := range keys {
			if k.Equals(keys[i].PublicKey()) {
				return &keys[i]
			}
		}
		return nil
	}); err != nil {
		return solana.Signature{}, fmt.Errorf("sign: %w", err)
	}
	sig, err := s.client.SendTransactionWithOpts(ctx, tx, rpc.TransactionOpts{PreflightCommitment: rpc.CommitmentConfirmed})
	if err != nil {
		return solana.Signature{}, err
	}
	return sig, s.waitConfirmed(ctx, sig, bh.Value.LastValidBlockHeight)
}

// waitConfirmed polls the signature's status until it is confirmed, fails,
// or its blockhash expires.
func (s *Solana) waitConfirmed(ctx context.Context, sig solana.Signature, lastValid uint64) error {
	poll := min(max(s.cfg.SlotTime/2, 10*time.Millisecond), 200*time.Millisecond)
	for {
		st, err := s.client.GetSignatureStatuses(ctx, true, sig)
		if err != nil {
			return fmt.Errorf("solana devnet: status of %s: %w", sig, err)
		}
		if v := st.Value[0]; v != nil {
			if v.Err != nil {
				return fmt.Errorf("solana devnet: transaction %s failed: %v", sig, v.Err)
			}
			if v.ConfirmationStatus == rpc.ConfirmationStatusConfirmed || v.ConfirmationStatus == rpc.ConfirmationStatusFinalized {
				return nil
			}
		} else {
			h, err := s.client.GetBlockHeight(ctx, rpc.CommitmentConfirmed)
			if err == nil && h > lastValid {
				return fmt.Errorf("solana devnet: transaction %s expired without landing", sig)
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("solana devnet: waiting for %s: %w", sig, ctx.Err())
		case <-s.exited:
			return fmt.Errorf("solana devnet: server exited: %v", s.waitErr)
		case <-time.After(poll):
		}
	}
}

// Close stops the devnet: it closes the server's stdin, then signals it,
// then kills it if it has not gone within five seconds. It reports an error
// only if the server had died by itself before.
func (s *Solana) Close() error {
	var err error
	s.closeMu.Do(func() {
		select {
		case <-s.exited:
			if s.waitErr != nil {
				err = fmt.Errorf("solana devnet: server had exited: %w: %s", s.waitErr, s.stderr.String())
			}
		default:
		}
		if s.client != nil {
			_ = s.client.Close()
		}
		_ = s.stdin.Close()
		select {
		case <-s.exited:
			return
		case <-time.After(2 * time.Second):
		}
		_ = s.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-s.exited:
		case <-time.After(5 * time.Second):
			_ = s.cmd.Process.Kill()
			<-s.exited
		}
	})
	return err
}

// tailBuffer keeps the last max bytes written to it.
type tailBuffer struct {
	mu  sync.Mutex
	max int
	buf []byte
}

func (b *tailBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf = append(b.buf, p...)
	if len(b.buf) > b.max {
		b.buf = append([]byte(nil), b.buf[len(b.buf)-b.max:]...)
	}
	return len(p), nil
}

func (b *tailBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return strings.TrimSpace(string(b.buf))
}
