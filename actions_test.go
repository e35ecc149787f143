package agentpay

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestRenderActions: a facade writes each mark a text carries in its own
// terms, with the mark's argument; a text without marks, and a mark of no
// known action, stay as they are.
func TestRenderActions(t *testing.T) {
	t.Parallel()
	term := func(a Action, arg string) string { return "<" + string(a) + "|" + arg + ">" }
	tests := []struct{ name, text, want string }{
		{"no mark", "get a new one from the service", "get a new one from the service"},
		{"one", "pair first (" + ActionRequestPairing.Mark() + ")", "pair first (<request_pairing|>)"},
		{"argument", "read it with " + ActionReadCardRequest.Mark("0193-ab") + ".", "read it with <read_card_request|0193-ab>."},
		{"empty argument", ActionVerifyWallet.Mark(""), "<verify_wallet|>"},
		{"two", ActionVerifyPartner.Mark() + " or " + ActionVerifyWallet.Mark(), "<verify_partner|> or <verify_wallet|>"},
		{"inside JSON", `{"message":"roll (` + ActionRollWebhookSecret.Mark() + `)"}`, `{"message":"roll (<roll_webhook_secret|>)"}`},
		{"unknown action", "{{launch_rockets}}", "{{launch_rockets}}"},
		{"not a mark", "{{ request_pairing }} {request_pairing}", "{{ request_pairing }} {request_pairing}"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			require.Equal(t, tt.want, RenderActions(tt.text, term))
		})
	}
	seen := map[Action]bool{}
	for _, a := range Actions {
		require.False(t, seen[a], "%s listed twice", a)
		seen[a] = true
		require.Equal(t, "<"+string(a)+"|>", RenderActions(a.Mark(), term), "%s's mark renders", a)
	}
}
