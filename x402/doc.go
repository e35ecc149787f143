// Package x402 is the wire format of x402 (https://x402.org, the
// x402-foundation/x402 specifications) as agentpay speaks it: the
// payment requirements a 402 carries, the payment payload a client sends,
// the settlement answered, the facilitator's requests and answers, and the
// base64 JSON headers that carry them. It imports nothing else of
// agentpay, so a Go client (an agent paying a session, a merchant calling
// the facilitator) can import it; the rules (which session a payment
// pays, what is verified and settled, exactly once) are agentpay's root
// package's (x402.go, x402v2.go, x402svm.go, x402id.go there).
//
// Two versions, one 402:
//
//   - Version 2 (Version2): the 402 carries PaymentRequired in the
//     PAYMENT-REQUIRED header; the client answers with a PaymentPayload in
//     PAYMENT-SIGNATURE, whose Accepted echoes the Requirements it chose;
//     the answer carries a SettleResponse in PAYMENT-RESPONSE. Networks are
//     CAIP-2 (EVMNetwork: "eip155:<chain id>"; Solana's clusters:
//     "solana:" and the first 32 characters of the genesis hash, see
//     SolanaNetwork) and Requirements.Amount is in the asset's base units.
//   - Version 1 (Version1, deprecated, kept for v1 clients): the 402's body
//     lists RequirementsV1 (networks by name, such as "base-sepolia", see
//     NetworkV1ChainID); the client sends PaymentPayloadV1 in X-PAYMENT
//     and the answer is in X-PAYMENT-RESPONSE.
//
// Each header is the standard base64 of the value's JSON (EncodeHeader);
// the Decode functions also take unpadded URL-safe base64, as clients
// send both, and refuse a header over MaxHeaderBytes before decoding it.
// A header that does not decode is a *HeaderError naming the header.
//
// The exact scheme (SchemeExact), the one offered:
//
//   - on EVM chains the payer signs an EIP-3009 TransferWithAuthorization
//     (Authorization, its Signature beside it in Payload) of Amount of the
//     asset to PayTo, under the token's EIP-712 domain (Extra.Name and
//     Extra.Version; Extra.AssetTransferMethod "eip3009"); the server
//     relays it and pays the gas;
//   - on Solana the payer signs a whole transaction (Payload.Transaction,
//     base64): a TransferChecked of Amount of the mint to PayTo's token
//     account, Extra.Memo as its memo, Extra.FeePayer (the server) as fee
//     payer, whose signature it leaves empty; the server co-signs and
//     submits it.
//
// payment-identifier (ExtensionPaymentIdentifier): a client that may
// retry puts an id of its own in the payload's extensions
// (PaymentPayload.SetPaymentID; NewPaymentID makes one); the same id is
// the same payment, however often it is re-signed and sent. The 402
// declares the extension with its schema (PaymentIdentifierSchema).
package x402
