package solana

// Fuzz targets of what the Solana adapter reads from clients and the
// payment URIs it builds. Seeds are in testdata/fuzz/<target>; `make fuzz`
// runs each target (docs/testing.md).

import (
	"encoding/base64"
	"math/big"
	"net/url"
	"strings"
	"testing"

	"github.com/gagliardetto/solana-go"
	"github.com/shopspring/decimal"

	"agentpay/chains"
)

// FuzzParseAddress: an accepted address is the one base58 spelling of a
// 32-byte key (NormalizeAddress leaves addresses as they are, so a second
// spelling of one key would be a second address).
func FuzzParseAddress(f *testing.F) {
	f.Fuzz(func(t *testing.T, s string) {
		got, err := Wallets{}.ParseAddress(s)
		if err != nil {
			return
		}
		pk, err := solana.PublicKeyFromBase58(s)
		if err != nil || got != s || pk.String() != s {
			t.Fatalf("accepted %q, whose key %s spells differently (%v)", s, pk, err)
		}
	})
}

// FuzzPaymentURI: the Solana Pay URI of a deposit carries the recipient,
// the exact amount, the mint, and the merchant's label and message (free
// text) as one parameter each, read back unchanged by a URL parser: no
// text can add or replace a parameter.
func FuzzPaymentURI(f *testing.F) {
	f.Fuzz(func(t *testing.T, to, mint []byte, amount []byte, decimals uint8, label, message string) {
		r := chains.PaymentRequest{
			To: solana.PublicKeyFromBytes(pad32(to)).String(), Token: solana.PublicKeyFromBytes(pad32(mint)).String(),
			Amount: new(big.Int).SetBytes(amount), Decimals: int32(decimals % 19), Label: label, Message: message,
		}
		uri := Wallets{}.PaymentURI(r)
		u, err := url.Parse(uri)
		if err != nil {
			t.Fatalf("%q does not parse: %v", uri, err)
		}
		if u.Scheme != "solana" || u.Opaque != r.To {
			t.Fatalf("%q: recipient %q", uri, u.Opaque)
		}
		q, err := url.ParseQuery(u.RawQuery)
		if err != nil {
			t.Fatalf("%q: query: %v", uri, err)
		}
		want := map[string]string{"amount": decimal.NewFromBigInt(r.Amount, -r.Decimals).String(), "spl-token": r.Token}
		if label != "" {
			want["label"] = label
		}
		if message != "" {
			want["message"] = message
		}
		if len(q) != len(want) {
			t.Fatalf("%q has parameters %v, want %v", uri, q, want)
		}
		for k, v := range want {
			if len(q[k]) != 1 || q[k][0] != v {
				t.Fatalf("%q: %s is %q, want %q", uri, k, q[k], v)
			}
		}
		if strings.ContainsAny(uri, " +") {
			// Some wallets read + as a space, others as a plus.
			t.Fatalf("%q holds a space or a plus", uri)
		}
		amt, err := decimal.NewFromString(q.Get("amount"))
		if err != nil || !amt.Shift(r.Decimals).Equal(decimal.NewFromBigInt(r.Amount, 0)) || strings.ContainsAny(q.Get("amount"), "eE") {
			t.Fatalf("%q: amount %q is not %s base units", uri, q.Get("amount"), r.Amount)
		}
	})
}

func pad32(b []byte) []byte {
	out := make([]byte, 32)
	copy(out, b)
	return out
}

// FuzzDecodeExact: whatever a payer sends as an x402 exact transaction,
// the decoder never panics, and what it accepts is of the exact layout:
// two signers, the fee payer in no instruction's accounts, the transfer
// the third instruction, and its re-encoding the bytes the payer sent.
func FuzzDecodeExact(f *testing.F) {
	f.Fuzz(func(t *testing.T, raw []byte) {
		tx := base64.StdEncoding.EncodeToString(raw)
		p, err := DecodeExact(tx)
		if err != nil {
			if AsExactRefusal(err) == nil {
				t.Fatalf("a refusal without x402's reason: %v", err)
			}
			return
		}
		if p.Transaction() != tx {
			t.Fatalf("accepted a transaction that does not re-encode to itself")
		}
		if p.tx.Message.Header.NumRequiredSignatures != 2 || !p.tx.Message.AccountKeys[1].Equals(p.Payer) {
			t.Fatalf("accepted signers other than the fee payer and the payer")
		}
		for _, ix := range p.tx.Message.Instructions {
			for _, a := range ix.Accounts {
				if a == 0 {
					t.Fatalf("accepted the fee payer in an instruction's accounts")
				}
			}
		}
		if !p.tx.Message.AccountKeys[p.tx.Message.Instructions[2].ProgramIDIndex].Equals(solana.TokenProgramID) {
			t.Fatalf("accepted a third instruction that is not the token program's")
		}
	})
}
