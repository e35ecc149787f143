package web_test

import (
	"context"
	"crypto/ecdsa"
	"encoding/json"
	"fmt"
	"math/big"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"
	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/common/hexutil"
	"github.com/ethereum/go-ethereum/crypto"
	"github.com/ethereum/go-ethereum/signer/core/apitypes"
	"github.com/shopspring/decimal"
	"github.com/stretchr/testify/require"

	"agentpay"
	"agentpay/chains"
	"agentpay/chains/devnet/usdc"
	"agentpay/ent"
	"agentpay/internal/testenv"
)

// testWallet is an EIP-1193 provider for the page, as a browser wallet
// injects one (window.ethereum, there before the page's scripts), whose
// key is held here: the provider forwards each request to the test
// (chromedp.ExposeFunc), which answers it as a wallet would and signs
// eth_signTypedData_v4 with go-ethereum's EIP-712 hashing, so the
// signature the page posts is real.
type testWallet struct {
	key     *ecdsa.PrivateKey
	address common.Address

	mu sync.Mutex
	// chainID is the network the wallet is on (eth_chainId).
	chainID uint64
	// canSwitch: wallet_switchEthereumChain succeeds (else 4902, an
	// unknown chain).
	canSwitch bool
	// rejectSign: the user declines the signature (4001).
	rejectSign bool
	calls      []string
	signed     []apitypes.TypedData
}

func newTestWallet(t *testing.T, chainID uint64) *testWallet {
	t.Helper()
	key, err := crypto.GenerateKey()
	require.NoError(t, err)
	return &testWallet{key: key, address: crypto.PubkeyToAddress(key.PublicKey), chainID: chainID}
}

// providerJS defines window.ethereum on top of the exposed func: each
// request goes to the test as JSON and its answer comes back as JSON,
// {result} or {error: {code, message}} (an EIP-1193 ProviderRpcError).
const providerJS = `(() => {
	if (window.ethereum) return;
	window.ethereum = {
		isAgentpayTestWallet: true,
		request: ({ method, params }) => window.agentpayTestWallet(JSON.stringify({ method, params: params || [] }))
			.then(s => {
				const r = JSON.parse(s);
				if (r.error) { const e = new Error(r.error.message); e.code = r.error.code; throw e; }
				return r.result;
			}),
		on() {}, removeListener() {},
	};
})()`

// install puts the wallet into every document the tab loads from now on.
func (w *testWallet) install() chromedp.Action[chromedp.Void] {
	return chromedp.Steps(
		chromedp.ExposeFunc("agentpayTestWallet", func(_ context.Context, req string) (string, error) {
			return w.answer(req), nil
		}),
		chromedp.Func(func(ctx context.Context, t *chromedp.Target) error {
			_, err := cdp.Call(ctx, t, page.AddScriptToEvaluateOnNewDocument, page.AddScriptToEvaluateOnNewDocumentParams{Source: providerJS})
			return err
		}),
	)
}

type walletError struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
}

// answer is the wallet's answer to one request, as JSON.
func (w *testWallet) answer(raw string) string {
	var req struct {
		Method string            `json:"method"`
		Params []json.RawMessage `json:"params"`
	}
	reply := func(result any, werr *walletError) string {
		b, _ := json.Marshal(map[string]any{"result": result, "error": werr})
		return string(b)
	}
	if err := json.Unmarshal([]byte(raw), &req); err != nil {
		return reply(nil, &walletError{-32700, err.Error()})
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.calls = append(w.calls, req.Method)
	switch req.Method {
	case "eth_requestAccounts", "eth_accounts":
		return reply([]string{w.address.Hex()}, nil)
	case "eth_chainId":
		return reply(hexutil.EncodeUint64(w.chainID), nil)
	case "wallet_switchEthereumChain":
		var p []struct {
			ChainID string `json:"chainId"`
		}
		if err := json.Unmarshal([]byte("["+string(req.Params[0])+"]"), &p); err != nil || len(p) != 1 {
			return reply(nil, &walletError{-32602, "bad params"})
		}
		if !w.canSwitch {
			return reply(nil, &walletError{4902, "Unrecognized chain ID " + p[0].ChainID})
		}
		id, err := hexutil.DecodeUint64(p[0].ChainID)
		if err != nil {
			return reply(nil, &walletError{-32602, err.Error()})
		}
		w.chainID = id
		return reply(nil, nil)
	case "eth_signTypedData_v4":
		if w.rejectSign {
			return reply(nil, &walletError{4001, "User rejected the request."})
		}
		var from, data string
		if len(req.Params) != 2 || json.Unmarshal(req.Params[0], &from) != nil || json.Unmarshal(req.Params[1], &data) != nil {
			return reply(nil, &walletError{-32602, "expected [address, typed data JSON]"})
		}
		if !strings.EqualFold(from, w.address.Hex()) {
			return reply(nil, &walletError{4100, "unknown account " + from})
		}
		var td apitypes.TypedData
		if err := json.Unmarshal([]byte(data), &td); err != nil {
			return reply(nil, &walletError{-32602, err.Error()})
		}
		hash, _, err := apitypes.TypedDataAndHash(td)
		if err != nil {
			return reply(nil, &walletError{-32602, err.Error()})
		}
		sig, err := crypto.Sign(hash, w.key)
		if err != nil {
			return reply(nil, &walletError{-32603, err.Error()})
		}
		sig[64] += 27 // as wallets answer
		w.signed = append(w.signed, td)
		return reply(hexutil.Encode(sig), nil)
	}
	return reply(nil, &walletError{4200, "unsupported method " + req.Method})
}

func (w *testWallet) snapshot() (calls []string, signed []apitypes.TypedData) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]string(nil), w.calls...), append([]apitypes.TypedData(nil), w.signed...)
}

// walletMerchant registers a merchant without success_url, so a confirmed
// page stays on its success view.
func walletMerchant(t *testing.T, h *harness) *ent.Merchant {
	t.Helper()
	name, email := "Acme Coffee", "shop@example.com"
	reg, err := h.svc.RegisterMerchant(context.Background(), agentpay.MerchantInput{Name: &name, Email: &email})
	require.NoError(t, err)
	return reg.Merchant
}

// usdcUnits is a USDC amount in base units.
func usdcUnits(s string) *big.Int {
	return decimal.RequireFromString(s).Shift(agentpay.USDCDecimals).BigInt()
}

// openWalletTab opens a tab with w installed (none when w is nil) on the
// session's page and chooses base.
func openWalletTab(t *testing.T, bctx context.Context, url string, w *testWallet) context.Context {
	t.Helper()
	tab, cancel := chromedp.NewContext(bctx)
	t.Cleanup(cancel)
	ctx, cancelTimeout := context.WithTimeout(tab, 2*time.Minute)
	t.Cleanup(cancelTimeout)
	if w != nil {
		require.NoError(t, chromedp.Do(ctx, w.install()))
	}
	require.NoError(t, chromedp.Do(ctx,
		chromedp.Navigate(url),
		chromedp.WaitVisible(`button.chain[data-chain="base"]`),
		chromedp.Click(`button.chain[data-chain="base"]`),
		chromedp.WaitVisible(`#qr svg`),
	))
	return ctx
}

func visible(t *testing.T, ctx context.Context, id string) bool {
	t.Helper()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`(() => { const e = document.getElementById(`+strconv.Quote(id)+`); return !!e && e.getClientRects().length > 0; })()`))
	require.NoError(t, err)
	return v
}

// TestWalletPayBrowser: a customer whose browser wallet holds USDC on base
// and no ETH pays the hosted page with "Pay with browser wallet": the
// wallet, on another network first, is asked to switch, signs the EIP-712
// TransferWithAuthorization of exactly the amount to the deposit address,
// the service relays it with the treasury's gas, and the page follows the
// payment to confirmed. The payer's ETH balance stays 0.
func TestWalletPayBrowser(t *testing.T) {
	h := newHarnessWith(t, testenv.Options{
		Chains:        []chains.Name{chains.Base},
		Confirmations: map[chains.Name]uint64{chains.Base: 2},
		BlockTime:     time.Second,
	})
	ctx := context.Background()
	sess := h.session(t, walletMerchant(t, h))

	w := newTestWallet(t, 1) // on Ethereum main net: the page asks to switch
	w.canSwitch = true
	_, err := h.evm.Send(ctx, w.address, usdcUnits("12.50")) // USDC only, no ETH
	require.NoError(t, err)
	client := h.evm.Client()
	ethBefore, err := client.BalanceAt(ctx, w.address, nil)
	require.NoError(t, err)
	require.Zero(t, ethBefore.Sign(), "the payer holds no ETH")

	bctx := testenv.StartBrowser(t)
	tab := openWalletTab(t, bctx, h.srv.URL+"/pay/"+sess.ExternalID, w)
	require.NoError(t, chromedp.Do(tab, chromedp.WaitVisible(`#wallet-pay-button`)), "a wallet is present on an EVM chain: the button shows")
	require.True(t, visible(t, tab, "wallet-link"), "the EIP-681 link stays")
	require.True(t, visible(t, tab, "qr"), "the QR code stays")
	address, err := chromedp.Run(tab, chromedp.Text(`#address`))
	require.NoError(t, err)
	// Looked at, not compared (as the state screenshots): the button on a phone.
	dir := *screenshots
	if dir == "" {
		dir = t.TempDir()
	}
	require.NoError(t, os.MkdirAll(dir, 0o755))
	png, err := chromedp.Run(tab, chromedp.FullScreenshot(100))
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "wallet-pay-phone.png"), png, 0o644))
	fits, err := chromedp.Run(tab, chromedp.Evaluate[bool](`document.documentElement.scrollWidth <= window.innerWidth`))
	require.NoError(t, err)
	require.True(t, fits, "nothing overflows horizontally on a phone")

	require.NoError(t, chromedp.Do(tab,
		chromedp.Click(`#wallet-pay-button`),
		waitCheckout(`c.dataset.walletPaid === "true" || !document.getElementById("wallet-pay-error").hidden`),
	))
	errText, err := chromedp.Run(tab, chromedp.Text(`#wallet-pay-error`))
	require.NoError(t, err)
	require.Empty(t, errText)

	calls, signed := w.snapshot()
	require.Contains(t, calls, "eth_requestAccounts")
	require.Contains(t, calls, "wallet_switchEthereumChain", "the wallet was on another network")
	require.Len(t, signed, 1)
	td := signed[0]
	require.Equal(t, "TransferWithAuthorization", td.PrimaryType)
	require.Equal(t, h.evm.USDC.Hex(), td.Domain.VerifyingContract)
	require.Equal(t, new(big.Int).SetUint64(h.evm.ChainID), (*big.Int)(td.Domain.ChainId))
	require.Equal(t, "2", td.Domain.Version)
	require.True(t, strings.EqualFold(address, fmt.Sprint(td.Message["to"])), "to the deposit address")
	require.Equal(t, "12500000", fmt.Sprint(td.Message["value"]), "exactly the amount")
	require.True(t, strings.EqualFold(w.address.Hex(), fmt.Sprint(td.Message["from"])))

	// The payment is recorded at once from the relayed transaction; the
	// deposit scan (the worker's, driven here) confirms it.
	st, err := h.svc.CheckoutStatus(ctx, sess.ExternalID, "")
	require.NoError(t, err)
	require.Contains(t, []string{"confirming", "confirmed"}, string(st.Status))
	require.Equal(t, "12.5", st.AmountPaid.String())
	deadline := time.Now().Add(time.Minute)
	for st.Status != "confirmed" && time.Now().Before(deadline) {
		_, err := h.svc.ScanDeposits(ctx, agentpay.ModeTest, chains.Base)
		require.NoError(t, err)
		st, err = h.svc.CheckoutStatus(ctx, sess.ExternalID, "")
		require.NoError(t, err)
		time.Sleep(300 * time.Millisecond)
	}
	require.Equal(t, "confirmed", string(st.Status))
	require.NoError(t, chromedp.Do(tab, waitCheckout(`c.dataset.state === "confirmed"`)), "the page shows the payment confirmed")

	pays, err := h.db.Ent.Payment.Query().All(ctx)
	require.NoError(t, err)
	require.Len(t, pays, 1)
	require.True(t, strings.EqualFold(w.address.Hex(), pays[0].FromAddress), "paid from the wallet")
	ethAfter, err := client.BalanceAt(ctx, w.address, nil)
	require.NoError(t, err)
	require.Zero(t, ethAfter.Sign(), "the treasury paid the gas")
	token, err := usdc.NewUSDCCaller(h.evm.USDC, client)
	require.NoError(t, err)
	usdcLeft, err := token.BalanceOf(nil, w.address)
	require.NoError(t, err)
	require.Zero(t, usdcLeft.Sign(), "the wallet paid exactly 12.50 USDC")
}

// TestWalletPayBrowserRefusals: without an EIP-1193 provider the page has
// no wallet button (the link and QR code stay); a declined signature, a
// wallet on another network that cannot switch, and a wallet short of USDC
// each show what happened, and nothing is paid.
func TestWalletPayBrowserRefusals(t *testing.T) {
	h := newHarnessWith(t, testenv.Options{
		Chains:        []chains.Name{chains.Base},
		Confirmations: map[chains.Name]uint64{chains.Base: 2},
		BlockTime:     time.Second,
	})
	ctx := context.Background()
	m := walletMerchant(t, h)
	bctx := testenv.StartBrowser(t)
	pageOf := func(sess *ent.CheckoutSession) string { return h.srv.URL + "/pay/" + sess.ExternalID }
	noPayment := func(sess *ent.CheckoutSession) {
		t.Helper()
		st, err := h.svc.CheckoutStatus(ctx, sess.ExternalID, "")
		require.NoError(t, err)
		require.Equal(t, "detecting", string(st.Status))
		require.True(t, st.AmountPaid.IsZero())
	}
	tryPay := func(tab context.Context) string {
		t.Helper()
		require.NoError(t, chromedp.Do(tab,
			chromedp.WaitVisible(`#wallet-pay-button`),
			chromedp.Click(`#wallet-pay-button`),
			chromedp.WaitVisible(`#wallet-pay-error`),
			chromedp.Poll[chromedp.Void](`!document.getElementById("wallet-pay-button").disabled`, chromedp.WithPollingTimeout(15*time.Second)),
		))
		text, err := chromedp.Run(tab, chromedp.Text(`#wallet-pay-error`))
		require.NoError(t, err)
		require.True(t, visible(t, tab, "wallet-pay-button"), "the customer may try again")
		require.True(t, visible(t, tab, "wallet-link"), "or pay another way")
		return text
	}

	t.Run("no wallet", func(t *testing.T) {
		sess := h.session(t, m)
		tab := openWalletTab(t, bctx, pageOf(sess), nil)
		require.False(t, visible(t, tab, "wallet-pay"), "no window.ethereum, no wallet button")
		require.False(t, visible(t, tab, "wallet-pay-button"))
		require.True(t, visible(t, tab, "wallet-link"))
		require.True(t, visible(t, tab, "qr"))
	})

	t.Run("declined", func(t *testing.T) {
		sess := h.session(t, m)
		w := newTestWallet(t, h.evm.ChainID)
		w.rejectSign = true
		_, err := h.evm.Send(ctx, w.address, usdcUnits("12.50"))
		require.NoError(t, err)
		tab := openWalletTab(t, bctx, pageOf(sess), w)
		text := tryPay(tab)
		require.Equal(t, "You declined the request in your wallet. Nothing was paid: try again, or send the amount yourself below.", text)
		calls, _ := w.snapshot()
		require.Contains(t, calls, "eth_signTypedData_v4")
		noPayment(sess)
	})

	t.Run("another network", func(t *testing.T) {
		sess := h.session(t, m)
		w := newTestWallet(t, 1)
		tab := openWalletTab(t, bctx, pageOf(sess), w)
		text := tryPay(tab)
		require.Equal(t, fmt.Sprintf("Your wallet is on another network. Switch it to Base (chain id %d) and try again.", h.evm.ChainID), text)
		calls, signed := w.snapshot()
		require.Contains(t, calls, "wallet_switchEthereumChain")
		require.Empty(t, signed, "nothing signed on the wrong network")
		noPayment(sess)
	})

	t.Run("short of USDC", func(t *testing.T) {
		sess := h.session(t, m)
		w := newTestWallet(t, h.evm.ChainID)
		_, err := h.evm.Send(ctx, w.address, usdcUnits("5"))
		require.NoError(t, err)
		tab := openWalletTab(t, bctx, pageOf(sess), w)
		text := tryPay(tab)
		require.True(t, strings.HasPrefix(text, "The payment was not made: insufficient"), text)
		_, signed := w.snapshot()
		require.Len(t, signed, 1, "the wallet signed; the service refused before relaying")
		noPayment(sess)
	})
}
