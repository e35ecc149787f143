package main

import (
	"context"
	"net/http"
	"strings"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"
)

type bearerTransport struct{ key string }

func (b bearerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.key)
	return http.DefaultTransport.RoundTrip(r)
}

// devMCPFlow: `agentpay dev` serves /mcp (the banner says where); without a
// key it is 401, with a new agent's key the Go SDK's client lists the
// agent's tools.
func devMCPFlow(t *testing.T, base, banner string) {
	require.Contains(t, banner, base+"/mcp")
	resp, err := http.Post(base+"/mcp", "application/json", strings.NewReader(`{}`))
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusUnauthorized, resp.StatusCode)

	var reg map[string]any
	status := postJSON(t, base+"/agents/quick-register", `{"username":"mcp_dev_agent"}`, &reg)
	require.Equal(t, http.StatusCreated, status, reg)
	client := sdk.NewClient(&sdk.Implementation{Name: "dev-test", Version: "1"}, nil)
	cs, err := client.Connect(context.Background(), &sdk.StreamableClientTransport{
		Endpoint: base + "/mcp", HTTPClient: &http.Client{Transport: bearerTransport{key: reg["api_key"].(string)}}, DisableStandaloneSSE: true,
	}, nil)
	require.NoError(t, err)
	defer cs.Close()
	list, err := cs.ListTools(context.Background(), nil)
	require.NoError(t, err)
	var names []string
	for _, tool := range list.Tools {
		names = append(names, tool.Name)
	}
	require.Contains(t, names, "pay_checkout")
}
