package agentpay

import (
	"context"
	"crypto/ecdsa"
	"crypto/rand"
	"fmt"
	"math/big"
	"syscall"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum"
	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/crypto"
	"github.com/shopspring/decimal"

	"agentpay/chains"
	"agentpay/chains/devnet"
	"agentpay/ent"
	"agentpay/ent/checkoutsession"
	"agentpay/ent/funding"
	"agentpay/ent/payment"
	"agentpay/internal/testenv"
)

// BenchmarkScanVolume times one deposit scan (ScanDeposits, run until it
// has caught up with the head) over blocks holding N USDC transfers, half to
// watched deposit addresses (one open session each, paid its exact amount,
// so every one is recorded, confirmed and queued for settlement) and half
// to the treasury from outside (each a funding), on the base devnet with
// one confirmation required, so the one scan sees every transfer and finds
// it final (ScanDeposits' transaction commits synchronously, so nothing of
// the scan runs after it returns). The transfers are plain ERC-20 transfers from the devnet payer,
// as many per block as the block's gas takes (the devnet has no batch
// contract). Reported as wall and CPU ns per transfer: the goal is
// that these stay flat as N grows (transfers=10000 under twice
// transfers=100).
//
//	go test . -run '^$' -bench ScanVolume -benchtime 1x
func BenchmarkScanVolume(b *testing.B) {
	for _, n := range []int{100, 1_000, 10_000} {
		b.Run(fmt.Sprintf("transfers=%d", n), func(b *testing.B) { benchScanVolume(b, n) })
	}
}

func benchScanVolume(b *testing.B, n int) {
	ctx := context.Background()
	env := testenv.New(b, testenv.Options{Chains: []chains.Name{chains.Base},
		Confirmations: map[chains.Name]uint64{chains.Base: 1}})
	db, chain := env.DB, env.EVM(chains.Base)
	cfg := Config{}
	env.Fill(&cfg)
	svc, err := NewService(cfg)
	if err != nil {
		b.Fatal(err)
	}
	merchant := db.Ent.Merchant.Create().SetName("Shop").SetEmail("shop@example.com").
		SetWebhookSecretEncrypted([]byte{1}).SaveX(ctx)
	// The cursor at the head: the transfers come after it.
	if _, err := svc.ScanDeposits(ctx, ModeTest, chains.Base); err != nil {
		b.Fatal(err)
	}
	treasury := common.HexToAddress(cfg.Treasury.Address(chains.Base))
	amount := decimal.RequireFromString("1")
	units := big.NewInt(1_000_000)
	var index int64

	var (
		scanned, cpu time.Duration
		outside      int
	)
	b.StopTimer()
	for range b.N {
		// Untimed: the sessions, their addresses and the transfers.
		deposits := n / 2
		sessions := make([]*ent.CheckoutSessionCreate, deposits)
		expires := time.Now().Add(time.Hour).UTC()
		for i := range sessions {
			sessions[i] = db.Ent.CheckoutSession.Create().SetMerchantID(merchant.ID).
				SetExternalID(fmt.Sprintf("cs_test_vol_%d", index+int64(i))).SetLivemode(false).
				SetAmountUsd(amount).SetCurrency("USD").SetStatus(checkoutsession.StatusDetecting).
				SetExpiresAt(expires)
		}
		var created []*ent.CheckoutSession
		for i := 0; i < len(sessions); i += 500 {
			created = append(created, db.Ent.CheckoutSession.CreateBulk(sessions[i:min(i+500, len(sessions))]...).SaveX(ctx)...)
		}
		to := make([]common.Address, 0, n)
		addrs := make([]*ent.DepositAddressCreate, deposits)
		for i, s := range created {
			a := randomEVMAddress(b)
			to = append(to, a)
			addrs[i] = db.Ent.DepositAddress.Create().SetSessionID(s.ID).SetChain(string(chains.Base)).
				SetChainFamily(string(chains.FamilyEVM)).SetAddress(a.Hex()).SetDerivationIndex(index)
			index++
		}
		for i := 0; i < len(addrs); i += 500 {
			db.Ent.DepositAddress.CreateBulk(addrs[i:min(i+500, len(addrs))]...).SaveX(ctx)
		}
		for len(to) < n {
			to = append(to, treasury)
			outside++
		}
		payerTransfers(b, chain, to, units)

		b.StartTimer()
		start, cpu0 := time.Now(), processCPU(b)
		head, err := chain.Client().BlockNumber(ctx)
		if err != nil {
			b.Fatal(err)
		}
		for {
			res, err := svc.ScanDeposits(ctx, ModeTest, chains.Base)
			if err != nil {
				b.Fatal(err)
			}
			if res.Next > head {
				break
			}
		}
		scanned += time.Since(start)
		cpu += processCPU(b) - cpu0
		b.StopTimer()

		confirmed := db.Ent.Payment.Query().Where(payment.StatusEQ(payment.StatusConfirmed)).CountX(ctx)
		fundings := db.Ent.Funding.Query().Where(funding.Source(FundingInbound)).CountX(ctx)
		if int64(confirmed) != index || fundings != outside {
			b.Fatalf("after the scan: %d confirmed payments, %d fundings; want %d and %d", confirmed, fundings, index, outside)
		}
	}
	b.ReportMetric(float64(scanned.Nanoseconds())/float64(b.N*n), "ns/transfer")
	b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N*n), "cpu-ns/transfer")
	b.ReportMetric(0, "ns/op")
}

// processCPU is the CPU time the process has used (user and system): on a
// machine shared with other work the wall time of a scan says more about
// the neighbours than about the scan, its CPU time less so. The devnet
// answers the scan's RPC calls in this process, so it is counted;
// PostgreSQL's own work is not (the wall time shows it).
func processCPU(tb testing.TB) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		tb.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// payerTransfers sends a plain USDC transfer of amount from the devnet's
// payer to each address, signed here with consecutive nonces and pooled a
// few hundred at a time (the pool's limits), each group sealed into as few
// blocks as its gas allows.
func payerTransfers(tb testing.TB, chain *devnet.EVM, to []common.Address, amount *big.Int) {
	tb.Helper()
	ctx := context.Background()
	client := chain.Client()
	payer := crypto.PubkeyToAddress(chain.Payer.PublicKey)
	nonce, err := client.PendingNonceAt(ctx, payer)
	if err != nil {
		tb.Fatal(err)
	}
	signer := types.LatestSignerForChainID(new(big.Int).SetUint64(chain.ChainID))
	selector := crypto.Keccak256([]byte("transfer(address,uint256)"))[:4]
	// A transfer's gas as the token charges a new holder, with a margin:
	// the block takes as many as the limits leave room for.
	probe := append(append(append([]byte{}, selector...), common.LeftPadBytes(randomEVMAddress(tb).Bytes(), 32)...), common.LeftPadBytes(amount.Bytes(), 32)...)
	gas, err := client.EstimateGas(ctx, ethereum.CallMsg{From: payer, To: &chain.USDC, Data: probe})
	if err != nil {
		tb.Fatal(err)
	}
	gas += gas / 5
	const group = 400
	for i := 0; i < len(to); i += group {
		var last common.Hash
		for _, a := range to[i:min(i+group, len(to))] {
			data := append(append(append([]byte{}, selector...), common.LeftPadBytes(a[:], 32)...), common.LeftPadBytes(amount.Bytes(), 32)...)
			tx := signedTx(tb, signer, chain.Payer, &types.DynamicFeeTx{
				ChainID: new(big.Int).SetUint64(chain.ChainID), Nonce: nonce, To: &chain.USDC, Gas: gas,
				GasTipCap: big.NewInt(1e9), GasFeeCap: big.NewInt(100e9), Data: data,
			})
			if err := client.SendTransaction(ctx, tx); err != nil {
				tb.Fatal(err)
			}
			last = tx.Hash()
			nonce++
		}
		// The pool takes transactions in asynchronously: seal until the
		// group's last (so, by nonce, all of it) is included.
		for tries := 0; ; tries++ {
			chain.Commit()
			if r, err := client.TransactionReceipt(ctx, last); err == nil {
				if r.Status != types.ReceiptStatusSuccessful {
					tb.Fatalf("transfer %s reverted", last)
				}
				break
			}
			if tries > 1000 {
				tb.Fatal("transfers not included")
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
}

func signedTx(tb testing.TB, signer types.Signer, key *ecdsa.PrivateKey, tx *types.DynamicFeeTx) *types.Transaction {
	tb.Helper()
	signed, err := types.SignTx(types.NewTx(tx), signer, key)
	if err != nil {
		tb.Fatal(err)
	}
	return signed
}

func randomEVMAddress(tb testing.TB) common.Address {
	tb.Helper()
	var a common.Address
	if _, err := rand.Read(a[:]); err != nil {
		tb.Fatal(err)
	}
	return a
}
