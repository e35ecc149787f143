package agentpay

import "testing"

func TestTransactionURL(t *testing.T) {
	for _, tc := range []struct {
		mode        Mode
		chain, hash string
		want        string
	}{
		{ModeLive, "base", "0xabc", "https://basescan.org/tx/0xabc"},
		{ModeTest, "base", "0xabc", "https://sepolia.basescan.org/tx/0xabc"},
		{ModeLive, "polygon", "0xabc", "https://polygonscan.com/tx/0xabc"},
		{ModeTest, "solana", "5sig", "https://solscan.io/tx/5sig?cluster=devnet"},
		{ModeLive, "solana", "5sig", "https://solscan.io/tx/5sig"},
		{ModeLive, "base", "", ""},
		{ModeLive, "dogecoin", "0xabc", ""},
		{ModeTest, "base", "a/b?c", "https://sepolia.basescan.org/tx/a%2Fb%3Fc"},
	} {
		if got := TransactionURL(tc.mode, tc.chain, tc.hash); got != tc.want {
			t.Errorf("TransactionURL(%s, %s, %q) = %q, want %q", tc.mode, tc.chain, tc.hash, got, tc.want)
		}
	}
}
