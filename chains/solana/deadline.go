package solana

import (
	"context"
	"net/http"
	"time"

	"github.com/gagliardetto/solana-go/rpc"
	"github.com/gagliardetto/solana-go/rpc/jsonrpc"

	"agentpay/chains"
	"agentpay/internal/redact"
)

// newRPC is a client of the node at rawURL whose every call has its own
// deadline, timeout (chains.DefaultRPCTimeout when zero), whatever the
// caller's context says: a node that accepts a request and never answers
// must not hold a caller (and what it holds, such as a database
// transaction or a job) for ever. A caller's shorter deadline still wins.
//
// rawURL may carry the provider's key, and solana-go puts the endpoint it
// was given in its errors ("rpc call getSlot() on <url>"), so it is given
// the redacted URL and a transport that sends to the real one
// (redact.HTTPClient).
func newRPC(rawURL string, timeout time.Duration) (*rpc.Client, error) {
	if timeout <= 0 {
		timeout = chains.DefaultRPCTimeout
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = 9 // solana-go's default
	dialURL, hc, err := redact.HTTPClient(rawURL, tr)
	if err != nil {
		return nil, err
	}
	c := jsonrpc.NewClientWithOpts(dialURL, &jsonrpc.RPCClientOpts{HTTPClient: hc})
	return rpc.NewWithCustomRPCClient(deadlineRPC{c: c, timeout: timeout}), nil
}

// deadlineRPC bounds each JSON-RPC call (or batch) of c.
type deadlineRPC struct {
	c       rpc.JSONRPCClient
	timeout time.Duration
}

func (d deadlineRPC) CallForInto(ctx context.Context, out any, method string, params []any) error {
	ctx, cancel := context.WithTimeout(ctx, d.timeout)
	defer cancel()
	return d.c.CallForInto(ctx, out, method, params)
}

func (d deadlineRPC) CallWithCallback(ctx context.Context, method string, params []any, callback func(*http.Request, *http.Response) error) error {
	ctx, cancel := context.WithTimeout(ctx, d.timeout)
	defer cancel()
	return d.c.CallWithCallback(ctx, method, params, callback)
}

func (d deadlineRPC) CallBatch(ctx context.Context, requests jsonrpc.RPCRequests) (jsonrpc.RPCResponses, error) {
	ctx, cancel := context.WithTimeout(ctx, d.timeout)
	defer cancel()
	return d.c.CallBatch(ctx, requests)
}
