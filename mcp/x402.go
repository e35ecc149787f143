package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"agentpay"
	"agentpay/internal/httpx"
	"agentpay/x402"
)

// x402's MCP transport (x402 specs/transports-v2/mcp.md): a paid tool
// called without _meta["x402/payment"] answers isError with the
// PaymentRequired (structuredContent, and the same JSON as text); called
// again with the signed PaymentPayload there, it settles it through the
// same relay as GET /checkout/{id}/x402 (Service.PayX402V2) and answers
// the payment with the SettleResponse in _meta["x402/payment-response"].
const (
	metaX402Payment         = "x402/payment"
	metaX402PaymentResponse = "x402/payment-response"
	payX402Tool             = "pay_checkout_x402"
)

type payX402Input struct {
	ExternalID string `json:"external_id" jsonschema:"the session's external id (cs_test_... or cs_live_...)"`
}

// addPayX402 registers pay_checkout_x402 on the SDK's server: its answer
// carries _meta, which the typed tools of the table do not.
func (t *toolset) addPayX402(s *sdk.Server) {
	in, err := jsonschemaFor[payX402Input]()
	if err != nil {
		panic("mcp: input schema of " + payX402Tool + ": " + err.Error())
	}
	out, err := jsonschemaFor[httpx.X402Paid]()
	if err != nil {
		panic("mcp: output schema of " + payX402Tool + ": " + err.Error())
	}
	s.AddTool(&sdk.Tool{Name: payX402Tool, InputSchema: in, OutputSchema: out,
		Description: "Pay an agentpay checkout session with x402 (MCP transport) from a wallet the agent signs with: call without _meta[\"x402/payment\"] to get the PaymentRequired (isError, structuredContent), sign an EIP-3009 authorization for one of its accepts, and call again with the PaymentPayload in _meta[\"x402/payment\"]; the answer is the payment, its settlement in _meta[\"x402/payment-response\"]."},
		func(ctx context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			if _, err := t.agent(ctx, req); err != nil {
				return errorResult(t.toolError(ctx, payX402Tool, err).Error()), nil
			}
			var input payX402Input
			if err := json.Unmarshal(req.Params.Arguments, &input); err != nil || input.ExternalID == "" {
				return errorResult("external_id: required"), nil
			}
			return t.payX402(ctx, input.ExternalID, req.Params.Meta[metaX402Payment]), nil
		})
}

func errorResult(detail string) *sdk.CallToolResult {
	return &sdk.CallToolResult{IsError: true, Content: []sdk.Content{&sdk.TextContent{Text: detail}}}
}

func jsonResult(v any, isError bool) *sdk.CallToolResult {
	text, _ := json.Marshal(v)
	return &sdk.CallToolResult{IsError: isError, StructuredContent: v, Content: []sdk.Content{&sdk.TextContent{Text: string(text)}}}
}

// payX402 answers the PaymentRequired, or settles payment.
func (t *toolset) payX402(ctx context.Context, externalID string, payment any) *sdk.CallToolResult {
	challenge := func(message string, settle *x402.SettleResponse) *sdk.CallToolResult {
		offer, err := t.svc.X402Offers(ctx, externalID, "mcp://tool/"+payX402Tool+"?external_id="+externalID)
		if err != nil {
			return errorResult(t.toolError(ctx, payX402Tool, err).Error())
		}
		offer.V2.Error = message
		res := jsonResult(offer.V2, true)
		if settle != nil {
			res.Meta = sdk.Meta{metaX402PaymentResponse: settle}
		}
		return res
	}
	if payment == nil {
		return challenge("Payment required: pay with _meta[\""+metaX402Payment+"\"] (x402 v2, exact scheme)", nil)
	}
	raw, err := json.Marshal(payment)
	var p x402.PaymentPayload
	if err == nil && len(raw) > x402.MaxHeaderBytes {
		return challenge("x402/payment: must be at most the payload size x402 allows", nil)
	}
	if err != nil || json.Unmarshal(raw, &p) != nil {
		return challenge("x402/payment: must be an x402 v2 PaymentPayload", nil)
	}
	res, settle, err := t.svc.PayX402V2(ctx, externalID, "", &p)
	if err != nil {
		var verr *agentpay.ValidationError
		if errors.As(err, &verr) || errors.Is(err, agentpay.ErrInsufficientFunds) {
			return challenge(err.Error(), t.svc.X402Refusal(err, &p))
		}
		if status, _ := httpx.ErrorStatus(err, false); status == http.StatusInternalServerError {
			t.logger.ErrorContext(ctx, "mcp: x402 payment", "err", err)
		}
		return errorResult(t.toolError(ctx, payX402Tool, err).Error())
	}
	if !settle.Success {
		return challenge("the transaction "+res.TxHash+" failed on chain; nothing was paid", settle)
	}
	out := jsonResult(httpx.X402PaidOf(res), false)
	out.Meta = sdk.Meta{metaX402PaymentResponse: settle}
	return out
}
