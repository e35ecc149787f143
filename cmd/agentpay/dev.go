package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/big"
	"net"
	"net/http"
	"strings"
	"sync"
	"text/tabwriter"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/crypto"
	sol "github.com/gagliardetto/solana-go"

	"agentpay"
	cardsandbox "agentpay/cardissuer/sandbox"
	"agentpay/chains"
	"agentpay/chains/devnet"
	"agentpay/identity/devpartner"
	"agentpay/identity/sandbox"
	"agentpay/internal/store"
	"agentpay/rest"
)

// runDev runs everything in one process: migrations, five local chains with
// the treasury funded, the API with the dev routes, and the worker.
func runDev(ctx context.Context, cfg config, logger *slog.Logger, stdout io.Writer) error {
	key, err := devMasterKey(cfg)
	if err != nil {
		return err
	}
	p, err := openPlatform(ctx, cfg, key)
	if err != nil {
		return err
	}
	defer p.db.Close()
	if err := store.Migrate(ctx, p.db); err != nil {
		return err
	}

	nets, err := startDevnets(ctx, cfg, p.treasury)
	if err != nil {
		return err
	}
	defer nets.Close()
	test, err := nets.networks(ctx, cfg, p.treasury, logger)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", cfg.HTTPAddr)
	if err != nil {
		return fmt.Errorf("HTTP_ADDR: %w", err)
	}
	defer ln.Close() // (served below; closed here on an early return)

	// The identity provider's sandbox: its secret lives as long as its
	// sessions, in this process. It calls back the address this process
	// listens on, never one a request's Host header names.
	secret := make([]byte, 32)
	if _, err := rand.Read(secret); err != nil {
		return err
	}
	kyc, err := sandbox.New(sandbox.Config{Secret: secret, PagePath: devKYCPath,
		CallbackURL: "http://" + ln.Addr().String() + "/identity/callbacks/" + sandbox.Name})
	if err != nil {
		return err
	}
	p.identity = kyc
	// The card issuer's sandbox: its cards live in this process, and it
	// plays the card network for POST /dev/card/charge.
	p.cards = cardsandbox.New()

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var metricsURL string
	if p.metrics, metricsURL, err = startMetrics(ctx, cfg, true, logger); err != nil {
		return err
	}
	// The admin API is on in dev: with ADMIN_KEY's key, or one made for
	// this run and shown in the banner (stdout, never the log).
	adminKey := "the key in ADMIN_KEY"
	if cfg.AdminKeyHash == nil {
		b := make([]byte, 32)
		if _, err := rand.Read(b); err != nil {
			return err
		}
		adminKey = hex.EncodeToString(b)
		cfg.AdminKeyHash = agentpay.AdminKeyHash(adminKey)
	}
	jobs := &lateJobs{}
	svc, err := p.service(ctx, cfg, logger, test, nets, jobs)
	if err != nil {
		return err
	}
	cacheCheckoutStatuses(ctx, svc, logger)
	if err := nets.fundTreasury(ctx, svc, p.treasury); err != nil {
		return err
	}
	w, err := newWorker(p.db, svc, logger, jobs, workerObserver(p.metrics))
	if err != nil {
		return err
	}

	_, playground := graphQLSurface(cfg, true)
	printDevBanner(stdout, ln.Addr().String(), playground, nets.Chains(), p.treasury, cfg.SMTPURL != "", appLine(cfg), strings.TrimRight(cfg.AppURL, "/"), metricsURL, adminKey)

	jobsErr := make(chan error, 1)
	go func() { jobsErr <- w.Run(ctx) }()
	err = serveHTTP(ctx, ln, devHTTPHandler(cfg, svc, logger, kyc.Handler(), httpObserver(p.metrics)), logger)
	cancel()
	if jerr := <-jobsErr; jerr != nil && !errors.Is(jerr, context.Canceled) && err == nil {
		err = jerr
	}
	return err
}

// devKYCPath is where `agentpay dev` serves the identity provider
// sandbox's pages.
const devKYCPath = "/dev/kyc"

// devHTTPHandler is the router `agentpay dev` serves: serve's
// (serveHTTPHandler) with the dev routes (/dev/faucet, /dev/chains,
// /dev/mail, /dev/partner/..., /dev/card/charge: rest.Config.Dev) and the
// sandboxes' pages (the identity provider's, kyc, at devKYCPath).
// TestServeAnswersNoDevRoute walks this router and holds serve's to 404
// on every /dev path it has.
func devHTTPHandler(cfg config, svc *agentpay.Service, logger *slog.Logger, kyc http.Handler, obs rest.HTTPObserver) http.Handler {
	return newHTTPHandler(cfg, svc, logger, true, map[string]http.Handler{devKYCPath + "/*": kyc}, obs)
}

func printDevBanner(w io.Writer, addr string, playground bool, list []agentpay.DevChain, treasury agentpay.TreasuryKeys, smtp bool, app, appURL, metricsURL, adminKey string) {
	fmt.Fprintf(w, "agentpay dev listening on http://%s\n", addr)
	if playground {
		fmt.Fprintf(w, "  GraphQL:    http://%s/graphql (playground: /playground)\n", addr)
	} else {
		fmt.Fprintf(w, "  GraphQL:    http://%s/graphql\n", addr)
	}
	fmt.Fprintf(w, "  MCP:        http://%s/mcp (streamable HTTP; Authorization: Bearer <agent key>)\n", addr)
	fmt.Fprintf(w, "  faucet:     POST http://%s/dev/faucet {\"chain\",\"address\",\"amount_usd\"}\n", addr)
	fmt.Fprintf(w, "  identity:   sandbox provider at http://%s/dev/kyc/ (started from the app)\n", addr)
	fmt.Fprintf(w, "  cards:      sandbox issuer; POST http://%s/dev/card/charge {\"card_number\",\"exp_month\",\"exp_year\",\"cvc\",\"amount_usd\",\"merchant_name\"} charges a card\n", addr)
	fmt.Fprintf(w, "  partner:    POST http://%s/dev/partner/attest {\"agent_id\"} mints an attestation of %s (keys: /dev/partner/jwks.json)\n",
		addr, devpartner.Name)
	if smtp {
		fmt.Fprintln(w, "  mail:       sent with SMTP_URL")
	} else {
		fmt.Fprintf(w, "  mail:       caught locally: GET http://%s/dev/mail?to=<address>\n", addr)
	}
	fmt.Fprintln(w, app)
	fmt.Fprintf(w, "  merchants:  sign up at %s/merchants/new (keys shown once, then its dashboard)\n", appURL)
	if metricsURL != "" {
		fmt.Fprintf(w, "  metrics:    %s (METRICS_ADDR; off: METRICS_ADDR=off)\n", metricsURL)
	}
	fmt.Fprintf(w, "  treasury:   evm %s, solana %s\n", treasury.EVMAddress, treasury.SolanaAddress)
	fmt.Fprintf(w, "  admin:      X-Admin-Key: %s (the books query; agentpay admin books)\n", adminKey)
	fmt.Fprintln(w, "  devnets:")
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	for _, c := range list {
		id := ""
		if c.Chain.IsEVM() {
			id = fmt.Sprintf("chain id %d", c.ChainID)
		}
		fmt.Fprintf(tw, "    %s\t%s\t%s\tUSDC %s\n", c.Chain, c.RPCURL, id, c.USDC)
	}
	_ = tw.Flush()
}

// appLine says where the human app is, and whether passkeys work there
// (their relying party is APP_URL's host, which must be a domain name:
// open the app at that host, not at 127.0.0.1).
func appLine(cfg config) string {
	if cfg.PasskeyRPID == "" {
		return fmt.Sprintf("  app:        %s (passkeys off: APP_URL's host is an IP address)", cfg.AppURL)
	}
	return fmt.Sprintf("  app:        %s (passkeys for %s)", cfg.AppURL, cfg.PasskeyRPID)
}

// devnets are the local chains of `agentpay dev`; they also serve as its faucet.
type devnets struct {
	evm map[chains.Name]*devnet.EVM
	sol *devnet.Solana
}

var _ agentpay.Faucet = (*devnets)(nil)

// startDevnets starts the five chains concurrently, funding the treasury
// with native coin so it can pay gas and fees.
func startDevnets(ctx context.Context, cfg config, treasury agentpay.TreasuryKeys) (*devnets, error) {
	d := &devnets{evm: map[chains.Name]*devnet.EVM{}}
	var (
		mu   sync.Mutex
		wg   sync.WaitGroup
		errs []error
	)
	fail := func(err error) {
		mu.Lock()
		errs = append(errs, err)
		mu.Unlock()
	}
	for _, name := range chains.EVMChains {
		wg.Add(1)
		go func() {
			defer wg.Done()
			e, err := devnet.StartEVM(ctx, devnet.EVMConfig{
				Chain:     name,
				BlockTime: cfg.DevBlockTime,
				Fund:      []common.Address{common.HexToAddress(treasury.EVMAddress)},
			})
			if err != nil {
				fail(fmt.Errorf("devnet %s: %w", name, err))
				return
			}
			mu.Lock()
			d.evm[name] = e
			mu.Unlock()
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		s, err := devnet.StartSolana(ctx, devnet.SolanaConfig{
			Fund: []sol.PublicKey{sol.MustPublicKeyFromBase58(treasury.SolanaAddress)},
			// Stands for the public devnet, so test mode offers x402 on
			// Solana as on the public devnet (x402svm.go).
			GenesisHash: devnet.SolanaDevnetGenesisHash,
		})
		if err != nil {
			fail(fmt.Errorf("devnet solana: %w", err))
			return
		}
		d.sol = s
	}()
	wg.Wait()
	if len(errs) > 0 {
		d.Close()
		return nil, errors.Join(errs...)
	}
	return d, nil
}

// networks connects the service's ledgers to the devnets as its test networks.
func (d *devnets) networks(ctx context.Context, cfg config, treasury agentpay.TreasuryKeys, logger *slog.Logger) (chains.Networks, error) {
	cfgs := map[chains.Name]chainConfig{}
	for _, c := range d.Chains() {
		cfgs[c.Chain] = chainConfig{RPCURL: c.RPCURL, USDC: c.USDC, Confirmations: cfg.DevConfirmations[c.Chain]}
	}
	return buildNetworks(ctx, cfgs, treasury, cfg.RPCTimeout, logger)
}

func (d *devnets) Chains() []agentpay.DevChain {
	var out []agentpay.DevChain
	for _, name := range chains.EVMChains {
		if e, ok := d.evm[name]; ok {
			out = append(out, agentpay.DevChain{Chain: name, RPCURL: e.RPCURL, ChainID: e.ChainID, USDC: e.USDC.Hex()})
		}
	}
	if d.sol != nil {
		out = append(out, agentpay.DevChain{Chain: chains.Solana, RPCURL: d.sol.RPCURL, USDC: d.sol.Mint.String()})
	}
	return out
}

func (d *devnets) Fund(ctx context.Context, chain chains.Name, address string, amount *big.Int) (agentpay.FaucetTransfer, error) {
	if chain == chains.Solana {
		to, err := sol.PublicKeyFromBase58(address)
		if err != nil {
			return agentpay.FaucetTransfer{}, chains.ErrInvalidAddress
		}
		if !amount.IsUint64() {
			return agentpay.FaucetTransfer{}, agentpay.Invalid("amount_usd", "too large")
		}
		sig, err := d.sol.Send(ctx, to, amount.Uint64())
		if err != nil {
			return agentpay.FaucetTransfer{}, err
		}
		return agentpay.FaucetTransfer{TxHash: sig.String(), From: d.sol.Payer.PublicKey().String()}, nil
	}
	e, ok := d.evm[chain]
	if !ok {
		return agentpay.FaucetTransfer{}, agentpay.Invalid("chain", "no devnet for %s", chain)
	}
	hash, err := e.Send(ctx, common.HexToAddress(address), amount)
	if err != nil {
		return agentpay.FaucetTransfer{}, err
	}
	return agentpay.FaucetTransfer{TxHash: hash.Hex(), From: crypto.PubkeyToAddress(e.Payer.PublicKey).Hex()}, nil
}

// devTreasuryLiquidity is the test USDC the treasury starts with on each
// devnet, so settlements to another chain than the one paid on have
// liquidity to pay from.
var devTreasuryLiquidity = big.NewInt(1_000_000 * 1_000_000)

// fundTreasury gives the treasury its starting USDC on every devnet, and
// records it as an outside funding, which the books count.
func (d *devnets) fundTreasury(ctx context.Context, svc *agentpay.Service, treasury agentpay.TreasuryKeys) error {
	list := d.Chains()
	errs := make([]error, len(list))
	var wg sync.WaitGroup
	for i, c := range list {
		addr := treasury.Address(c.Chain)
		wg.Go(func() {
			sent, err := d.Fund(ctx, c.Chain, addr, devTreasuryLiquidity)
			if err == nil {
				err = svc.RecordFunding(ctx, agentpay.OutsideFunding{Chain: c.Chain, Mode: agentpay.ModeTest, Address: addr,
					Amount: devTreasuryLiquidity, TxHash: sent.TxHash, Source: agentpay.FundingTreasuryLiquidity})
			}
			if err != nil {
				errs[i] = fmt.Errorf("devnet %s: funding the treasury: %w", c.Chain, err)
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

func (d *devnets) Close() {
	for _, e := range d.evm {
		_ = e.Close()
	}
	if d.sol != nil {
		_ = d.sol.Close()
	}
}
