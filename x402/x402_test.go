package x402

import (
	"encoding/base64"
	"errors"
	"strings"
	"testing"
)

// TestDecodeHeader: a header is standard or unpadded URL-safe base64 of
// the JSON, within MaxHeaderBytes; anything else is a HeaderError naming
// the header, whatever the type read.
func TestDecodeHeader(t *testing.T) {
	payload := `{"x402Version":2,"accepted":{"scheme":"exact","network":"eip155:84532","amount":"5","asset":"0xa","payTo":"0x2","maxTimeoutSeconds":60,"extra":{}},` +
		`"payload":{"signature":"0xab","authorization":{"from":"0x1","to":"0x2","value":"5","validAfter":"0","validBefore":"9","nonce":"0x3"}},` +
		`"extensions":{"payment-identifier":{"info":{"required":false,"id":"pay_0123456789abcdef"},"schema":null}}}`
	for _, enc := range []string{
		base64.StdEncoding.EncodeToString([]byte(payload)),
		base64.RawURLEncoding.EncodeToString([]byte(payload)),
		" " + base64.StdEncoding.EncodeToString([]byte(payload)) + "\n",
	} {
		p, err := DecodePaymentSignature(enc)
		if err != nil {
			t.Fatalf("%q: %v", enc[:8], err)
		}
		if p.Accepted.Network != "eip155:84532" || p.Payload.Authorization.Value != "5" || p.Payload.Signature != "0xab" || p.PaymentID() != "pay_0123456789abcdef" {
			t.Fatalf("decoded %+v", p)
		}
	}
	for _, tc := range []struct{ name, header, reason string }{
		{"not base64", "!!", "must be base64 of the payment payload's JSON"},
		{"not an object", base64.StdEncoding.EncodeToString([]byte("[1]")), "must be base64 of the payment payload's JSON: "},
		{"too long", strings.Repeat("A", MaxHeaderBytes+1), "must be at most 4096 bytes"},
	} {
		_, err := DecodePaymentSignature(tc.header)
		var he *HeaderError
		if !errors.As(err, &he) || he.Header != HeaderPaymentSignature || !strings.HasPrefix(he.Reason, tc.reason) {
			t.Errorf("%s: %v", tc.name, err)
		}
		_, err = DecodePaymentV1(tc.header)
		if !errors.As(err, &he) || he.Header != HeaderPaymentV1 {
			t.Errorf("%s (v1): %v", tc.name, err)
		}
	}
}

// TestNetworks: CAIP-2 names as x402 clients write them.
func TestNetworks(t *testing.T) {
	for _, tc := range []struct {
		network string
		id      uint64
		ok      bool
	}{
		{"eip155:8453", 8453, true},
		{"eip155:1", 1, true},
		{"eip155:18446744073709551615", 1<<64 - 1, true},
		{"eip155:18446744073709551616", 0, false},
		{"eip155:08453", 0, false},
		{"eip155:+8453", 0, false},
		{"eip155:", 0, false},
		{"eip155:0x2105", 0, false},
		{"base", 0, false},
		{SolanaDevnet, 0, false},
	} {
		id, ok := EVMChainID(tc.network)
		if id != tc.id || ok != tc.ok {
			t.Errorf("EVMChainID(%q) = %d, %v", tc.network, id, ok)
		}
		if ok && EVMNetwork(id) != tc.network {
			t.Errorf("EVMNetwork(%d) = %q", id, EVMNetwork(id))
		}
	}
	for genesis, want := range map[string]string{
		"5eykt4UsFv8P8NJdTREpY1vzqKqZKvdpKuc147dw2N9d": SolanaMainnet,
		"EtWTRABZaYq6iMfeYKouRu166VU2xqa1wcaWoxPkrZBG": SolanaDevnet,
		"4uhcVJyU9pJkvQyS88uRDiswHXSCkY3zQawwpjk2NsNY": SolanaTestnet,
	} {
		if got := SolanaNetwork(genesis); got != want || !IsSolanaNetwork(got) {
			t.Errorf("SolanaNetwork(%s) = %q, want %q", genesis, got, want)
		}
	}
	if id, ok := NetworkV1ChainID("base-sepolia"); !ok || id != 84532 {
		t.Errorf("base-sepolia: %d %v", id, ok)
	}
}

// TestPaymentID: ids the extension allows, and NewPaymentID makes one.
func TestPaymentID(t *testing.T) {
	for id, ok := range map[string]bool{
		"pay_0123456789abcdef":   true,
		"pay_short":              false,
		"pay.0123456789abcdef":   false,
		strings.Repeat("a", 128): true,
		strings.Repeat("a", 129): false,
		"":                       false,
	} {
		if ValidPaymentID(id) != ok {
			t.Errorf("ValidPaymentID(%q) = %v", id, !ok)
		}
	}
	a, b := NewPaymentID(), NewPaymentID()
	if !ValidPaymentID(a) || a == b {
		t.Fatalf("NewPaymentID: %q, %q", a, b)
	}
	var p PaymentPayload
	p.SetPaymentID(a)
	if p.PaymentID() != a {
		t.Fatalf("PaymentID after SetPaymentID: %q", p.PaymentID())
	}
}
