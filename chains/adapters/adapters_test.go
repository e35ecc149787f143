package adapters

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"agentpay/chains"
)

// The credentials every URL below carries: none may show in an error.
var rpcSecrets = []string{"rpcUser", "rpcPassw0rd", "PathKeyAbc123xyz", "QueryKeyDef456uvw"}

func credentialedURL(scheme, hostPort string) string {
	return scheme + "://rpcUser:rpcPassw0rd@" + hostPort + "/v2/PathKeyAbc123xyz?api-key=QueryKeyDef456uvw"
}

// TestNetworkErrorsHideRPCCredentials: a chain whose node cannot be
// reached, refuses the request or is misconfigured fails to connect with an
// error that names the chain and the endpoint, never the provider's key, on
// every chain family and transport. The libraries' own errors (net/http's
// `Post "<url>"`, solana-go's `rpc call ... on <url>`) would carry it.
func TestNetworkErrorsHideRPCCredentials(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	dead := ln.Addr().String()
	require.NoError(t, ln.Close())

	// A node that answers every request 401, echoing nothing.
	refusing := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "unauthorized", http.StatusUnauthorized)
	}))
	t.Cleanup(refusing.Close) // after the parallel subtests
	up := strings.TrimPrefix(refusing.URL, "http://")

	tests := []struct {
		name  string
		chain chains.Name
		url   string
		usdc  string
	}{
		{"evm http, dead", chains.Base, credentialedURL("http", dead), "0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913"},
		{"evm http, refused", chains.Base, credentialedURL("http", up), "0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913"},
		{"evm websocket, dead", chains.Polygon, credentialedURL("ws", dead), "0x3c499c542cEF5E3811e1192ce70d8cC03d5c3359"},
		{"evm websocket, refused", chains.Polygon, credentialedURL("ws", up), "0x3c499c542cEF5E3811e1192ce70d8cC03d5c3359"},
		{"evm, not a URL", chains.Base, "http://rpcUser:rpcPassw0rd@[::1/v2/PathKeyAbc123xyz", "0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913"},
		{"solana, dead", chains.Solana, credentialedURL("http", dead), "EPjFWdd5AufqSSqeM2qN1xzybapC8G4wEGGkZwyTDt1v"},
		{"solana, refused", chains.Solana, credentialedURL("http", up), "EPjFWdd5AufqSSqeM2qN1xzybapC8G4wEGGkZwyTDt1v"},
		{"solana, not a URL", chains.Solana, "http://rpcUser:rpcPassw0rd@[::1/v2/PathKeyAbc123xyz", "EPjFWdd5AufqSSqeM2qN1xzybapC8G4wEGGkZwyTDt1v"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			// A real gas key, so each family gets as far as asking the node.
			gasKey, _, err := Families()[tt.chain.Family()].NewKey()
			require.NoError(t, err)
			_, err = Network(ctx, tt.chain, Chain{RPCURL: tt.url, USDC: tt.usdc, Confirmations: 1, GasKey: gasKey, StartPatience: 300 * time.Millisecond})
			require.Error(t, err)
			require.Contains(t, err.Error(), "chain "+string(tt.chain))
			for _, s := range rpcSecrets {
				require.NotContains(t, err.Error(), s)
			}
		})
	}
}
