package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/crypto"
	"github.com/stretchr/testify/require"
)

// TestDevX402NodeClient runs the x402 npm client (x402-fetch 1.2.0, from
// testdata/x402client) under node against `agentpay dev`, as
// docs/agent-commerce.md#x402 tells a developer to: a merchant's test
// session on the base devnet is paid by a wallet holding devnet USDC from
// /dev/faucet and no gas, and confirms. Blocks come every second: the
// token judges an authorization's validBefore by block time, and a faster
// devnet's clock runs ahead of the wall clock the client dates it by.
func TestDevX402NodeClient(t *testing.T) {
	if testing.Short() {
		t.Skip("starts five devnets")
	}
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("node is not installed: the x402 npm client cannot run")
	}
	dir, err := filepath.Abs(filepath.Join("..", "..", "testdata", "x402client"))
	require.NoError(t, err)
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "x402-fetch")); err != nil {
		t.Fatalf("%s has no node_modules: run make deps (npm ci there)", dir)
	}
	env := map[string]string{
		"DATA_DIR":       filepath.Join(t.TempDir(), "data"),
		"HTTP_ADDR":      "127.0.0.1:0",
		"DEV_BLOCK_TIME": "1s",
		"LOG_LEVEL":      "warn",
		"METRICS_ADDR":   "127.0.0.1:0",
	}
	base := startDev(t, env, io.Discard)

	var reg struct {
		Keys struct {
			TestSecretKey string `json:"test_secret_key"`
		} `json:"keys"`
	}
	require.Equal(t, http.StatusCreated, postJSON(t, base+"/checkout/merchants/register",
		`{"name": "x402 Shop", "email": "ops@x402.test"}`, &reg))
	var created struct {
		Session struct {
			ExternalID string `json:"external_id"`
		} `json:"session"`
	}
	require.Equal(t, http.StatusCreated, doJSON(t, http.MethodPost, base+"/checkout/sessions", reg.Keys.TestSecretKey,
		`{"amount": 1.25, "currency": "USD", "description": "an article"}`, &created))
	cs := created.Session.ExternalID

	key, err := crypto.GenerateKey()
	require.NoError(t, err)
	payer := crypto.PubkeyToAddress(key.PublicKey).Hex()
	var faucet map[string]any
	require.Equal(t, http.StatusOK, postJSON(t, base+"/dev/faucet", fmt.Sprintf(`{"chain":"base","address":%q,"amount_usd":5}`, payer), &faucet), faucet)

	cmd := exec.Command(node, "pay.mjs")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "X402_MODE=session", "SESSION_URL="+base+"/checkout/pay/"+cs+"/x402",
		"PAYER_KEY=0x"+common.Bytes2Hex(crypto.FromECDSA(key)))
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	require.NoError(t, err, "node pay.mjs: %s", stderr.String())
	var got struct {
		Status          int            `json:"status"`
		Body            map[string]any `json:"body"`
		PaymentResponse map[string]any `json:"paymentResponse"`
	}
	require.NoError(t, json.Unmarshal(out, &got), string(out))
	require.Equal(t, http.StatusOK, got.Status, string(out))
	require.Equal(t, "detected", got.Body["status"], string(out))
	require.Equal(t, 1.25, got.Body["amount_usd"])
	require.Equal(t, true, got.PaymentResponse["success"], string(out))
	require.Equal(t, "base-sepolia", got.PaymentResponse["network"])
	require.Equal(t, got.Body["tx_hash"], got.PaymentResponse["transaction"])
	require.Equal(t, payer, common.HexToAddress(got.PaymentResponse["payer"].(string)).Hex())

	// The payment confirms as any payment does (dev: 3 confirmations).
	require.Eventually(t, func() bool {
		var st struct {
			Status string `json:"status"`
		}
		return doJSON(t, http.MethodGet, base+"/checkout/pay/"+cs+"/status", "", "", &st) == http.StatusOK && st.Status == "confirmed"
	}, 60*time.Second, 250*time.Millisecond, "the session confirms")
}
