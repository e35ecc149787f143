package solana

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"math/big"

	bin "github.com/gagliardetto/binary"
	"github.com/gagliardetto/solana-go"
	"github.com/gagliardetto/solana-go/rpc"

	"agentpay/chains"
)

// x402's exact scheme on Solana (x402 specs/schemes/exact/scheme_exact_svm.md).
//
// The payer builds and signs a whole transaction: SetComputeUnitLimit,
// SetComputeUnitPrice, one SPL TransferChecked of exactly the amount of
// the mint from its token account to payTo's associated token account,
// then at most four Memo (or Lighthouse assertion) instructions. Its fee
// payer is the treasury (the requirement's extra.feePayer), whose
// signature slot the payer leaves empty. The treasury adds its signature
// and submits it, so a payer holding USDC and no SOL pays.
//
// The treasury's signature makes it pay for whatever the transaction
// does, so everything is checked before it signs, and the check is
// stricter than the reference facilitator's: the instruction layout is
// fixed; the fee payer appears in no instruction's accounts at all (it
// can neither move its own tokens nor be debited as a source, nor sign
// for anything but the fee); exactly two signers, the fee payer and the
// transfer's authority, whose signature must verify over the message;
// the compute unit limit and price bounded, so the fee is bounded; no
// address lookup tables (accounts the message does not show cannot be
// checked); and the transaction no larger than Solana's packet.
//
// Settling is idempotent without a record: the transaction's id is the
// fee payer's ed25519 signature of the message, which is deterministic,
// so the same payload settled twice is the same transaction, and the
// chain runs a signature at most once.

// Programs an exact transaction may call.
var (
	// MemoProgramID is the SPL Memo program (v2), which carries the memo.
	MemoProgramID = solana.MustPublicKeyFromBase58("MemoSq4gqABAXKb96qnH8TysNcWxMyWCqXgDLGmfcHr")
	// LighthouseProgramID is Lighthouse, whose assertions wallets such as
	// Phantom append; it reads accounts and fails the transaction when an
	// assertion does not hold.
	LighthouseProgramID = solana.MustPublicKeyFromBase58("L2TExMFKdjpN9kozasaurPirfHy9P8sbXoAN1qA3S95")
)

// Bounds of an exact transaction.
const (
	// ExactMaxComputeUnitPrice is x402's bound on the priority fee, in
	// micro-lamports per compute unit.
	ExactMaxComputeUnitPrice = 5_000_000
	// ExactMaxComputeUnitLimit bounds the compute units the treasury pays
	// a priority fee for: a TransferChecked uses about 6,500 and the npm
	// client asks 20,000; so the priority fee is at most 0.001 SOL.
	ExactMaxComputeUnitLimit = 200_000
	// ExactMaxMemoBytes is x402's bound on a memo.
	ExactMaxMemoBytes = 256
	// ExactMaxTransactionBytes is Solana's packet size, the largest
	// transaction a node takes.
	ExactMaxTransactionBytes = 1232
	// exactMaxOptional is how many memo or assertion instructions may
	// follow the transfer (seven instructions in all, as x402's).
	exactMaxOptional = 4
)

// x402's reasons for refusing an exact payment (invalidReason, errorReason).
const (
	ExactUndecodable         = "invalid_exact_svm_payload_transaction_could_not_be_decoded"
	ExactFeePayerMismatch    = "invalid_exact_svm_fee_payer_mismatch"
	ExactFeePayerNotManaged  = "invalid_exact_svm_payload_missing_fee_payer"
	ExactSignatureInvalid    = "invalid_exact_svm_payload_signature_invalid"
	ExactExcessiveSigners    = "invalid_exact_svm_payload_excessive_signers"
	ExactInstructionsLength  = "invalid_exact_svm_payload_transaction_instructions_length"
	ExactComputeLimit        = "invalid_exact_svm_payload_transaction_instructions_compute_limit_instruction"
	ExactComputeLimitTooHigh = "invalid_exact_svm_payload_transaction_instructions_compute_limit_instruction_too_high"
	ExactComputePrice        = "invalid_exact_svm_payload_transaction_instructions_compute_price_instruction"
	ExactComputePriceTooHigh = "invalid_exact_svm_payload_transaction_instructions_compute_price_instruction_too_high"
	ExactNoTransfer          = "invalid_exact_svm_payload_no_transfer_instruction"
	ExactFeePayerInvolved    = "invalid_exact_svm_payload_transaction_fee_payer_transferring_funds"
	ExactMintMismatch        = "invalid_exact_svm_payload_mint_mismatch"
	ExactRecipientMismatch   = "invalid_exact_svm_payload_recipient_mismatch"
	ExactAmountMismatch      = "invalid_exact_svm_payload_amount_mismatch"
	ExactUnknownInstruction  = "invalid_exact_svm_payload_unknown_optional_instruction"
	ExactMemoCount           = "invalid_exact_svm_payload_memo_count"
	ExactMemoMismatch        = "invalid_exact_svm_payload_memo_mismatch"
	ExactSimulationFailed    = "invalid_exact_svm_transaction_simulation_failed"
	ExactBlockhashExpired    = "invalid_exact_svm_payload_transaction_blockhash_expired"
)

// ExactRefusal is why an exact payment is refused; nothing was signed or
// sent. Reason is x402's code, Message says what in words.
type ExactRefusal struct {
	Reason  string
	Message string
}

func (e *ExactRefusal) Error() string { return "solana: x402 exact: " + e.Message }

// X402Reason is x402's code (chains.X402Refusal).
func (e *ExactRefusal) X402Reason() string { return e.Reason }

// Unwrap: a refusal is never broadcast.
func (e *ExactRefusal) Unwrap() error { return chains.ErrRefused }

func refuse(reason, format string, args ...any) *ExactRefusal {
	return &ExactRefusal{Reason: reason, Message: fmt.Sprintf(format, args...)}
}

// AsExactRefusal is err's refusal, nil when it is none.
func AsExactRefusal(err error) *ExactRefusal {
	var r *ExactRefusal
	if errors.As(err, &r) {
		return r
	}
	return nil
}

// ExactPayment is an exact transaction as decoded: its parts named, the
// transaction as the payer signed it.
type ExactPayment struct {
	tx      *solana.Transaction
	message []byte
	// FeePayer is the account paying the fee, the first of the message.
	FeePayer solana.PublicKey
	// Payer is the transfer's authority: the account that signed for the
	// tokens (x402's payer).
	Payer       solana.PublicKey
	Source      solana.PublicKey
	Destination solana.PublicKey
	Mint        solana.PublicKey
	Amount      uint64
	Decimals    uint8
	// ComputeUnitLimit and ComputeUnitPrice (micro-lamports) set the fee.
	ComputeUnitLimit uint32
	ComputeUnitPrice uint64
	// Memos are the memo instructions' data, in order.
	Memos     [][]byte
	Blockhash solana.Hash
}

// DecodeExact reads an exact payload's transaction (base64 of its wire
// form) and names its parts, refusing a transaction not of the exact
// layout (see the note above). It checks the form only; Verify checks it
// against what is asked.
func DecodeExact(transaction string) (*ExactPayment, error) {
	return decodeExact(transaction, false)
}

// decodeExact is DecodeExact; with anyComputeOrder the two compute budget
// instructions may come in either order (MPP's solana charge draft fixes
// none, and its client @solana/mpp puts the price first; x402's layout
// puts the limit first).
func decodeExact(transaction string, anyComputeOrder bool) (*ExactPayment, error) {
	if base64.StdEncoding.DecodedLen(len(transaction)) > ExactMaxTransactionBytes+3 {
		return nil, refuse(ExactUndecodable, "transaction larger than %d bytes", ExactMaxTransactionBytes)
	}
	raw, err := base64.StdEncoding.DecodeString(transaction)
	if err != nil {
		return nil, refuse(ExactUndecodable, "transaction is not base64")
	}
	if len(raw) > ExactMaxTransactionBytes {
		return nil, refuse(ExactUndecodable, "transaction larger than %d bytes", ExactMaxTransactionBytes)
	}
	dec := bin.NewBinDecoder(raw)
	tx, err := solana.TransactionFromDecoder(dec)
	if err != nil {
		return nil, refuse(ExactUndecodable, "transaction does not decode: %v", err)
	}
	if dec.Remaining() != 0 {
		return nil, refuse(ExactUndecodable, "%d bytes follow the transaction", dec.Remaining())
	}
	msg := &tx.Message
	if len(msg.AddressTableLookups) > 0 {
		return nil, refuse(ExactUndecodable, "transaction uses address lookup tables; its accounts must all be in the message")
	}
	message, err := msg.MarshalBinary()
	if err != nil {
		return nil, refuse(ExactUndecodable, "message does not encode: %v", err)
	}
	if !bytes.Equal(raw[len(raw)-len(message):], message) {
		return nil, refuse(ExactUndecodable, "message does not re-encode to the bytes signed")
	}
	h := msg.Header
	keys := msg.AccountKeys
	if len(keys) == 0 || int(h.NumRequiredSignatures) > len(keys) ||
		int(h.NumReadonlySignedAccounts) >= int(h.NumRequiredSignatures) ||
		int(h.NumRequiredSignatures)+int(h.NumReadonlyUnsignedAccounts) > len(keys) {
		return nil, refuse(ExactUndecodable, "message header does not fit its %d accounts", len(keys))
	}
	if len(tx.Signatures) != int(h.NumRequiredSignatures) {
		return nil, refuse(ExactUndecodable, "%d signatures for %d signers", len(tx.Signatures), h.NumRequiredSignatures)
	}
	if h.NumRequiredSignatures != 2 {
		return nil, refuse(ExactExcessiveSigners, "must have two signers, the fee payer and the transfer's authority, not %d", h.NumRequiredSignatures)
	}
	for i, ix := range msg.Instructions {
		if int(ix.ProgramIDIndex) >= len(keys) || ix.ProgramIDIndex == 0 {
			return nil, refuse(ExactUndecodable, "instruction %d names no program of the message", i)
		}
		for _, a := range ix.Accounts {
			if int(a) >= len(keys) {
				return nil, refuse(ExactUndecodable, "instruction %d names an account outside the message", i)
			}
		}
	}
	p := &ExactPayment{tx: tx, message: message, FeePayer: keys[0], Blockhash: msg.RecentBlockhash}
	if n := len(msg.Instructions); n < 3 || n > 3+exactMaxOptional {
		return nil, refuse(ExactInstructionsLength, "must have 3 to %d instructions, not %d", 3+exactMaxOptional, n)
	}
	program := func(i int) solana.PublicKey { return keys[msg.Instructions[i].ProgramIDIndex] }
	data := func(i int) []byte { return msg.Instructions[i].Data }

	// 0: SetComputeUnitLimit (2, u32); 1: SetComputeUnitPrice (3, u64);
	// swapped when any order is taken and instruction 0 is the price.
	budget := func(i int, op byte, size int) bool {
		d := data(i)
		return program(i).Equals(solana.ComputeBudget) && len(d) == size && d[0] == op && len(msg.Instructions[i].Accounts) == 0
	}
	limitAt, priceAt := 0, 1
	if anyComputeOrder && budget(0, 3, 9) {
		limitAt, priceAt = 1, 0
	}
	if !budget(limitAt, 2, 5) {
		return nil, refuse(ExactComputeLimit, "instruction %d must be the compute budget's SetComputeUnitLimit", limitAt)
	}
	p.ComputeUnitLimit = binary.LittleEndian.Uint32(data(limitAt)[1:])
	if !budget(priceAt, 3, 9) {
		return nil, refuse(ExactComputePrice, "instruction %d must be the compute budget's SetComputeUnitPrice", priceAt)
	}
	p.ComputeUnitPrice = binary.LittleEndian.Uint64(data(priceAt)[1:])

	// 2: TransferChecked (12, u64 amount, u8 decimals) of the classic
	// token program: source, mint, destination, authority, and no
	// multisig signers.
	tr := msg.Instructions[2]
	if d := data(2); !program(2).Equals(solana.TokenProgramID) || len(d) != 10 || d[0] != 12 {
		return nil, refuse(ExactNoTransfer, "instruction 2 must be the SPL token program's TransferChecked")
	}
	if len(tr.Accounts) != 4 {
		return nil, refuse(ExactNoTransfer, "TransferChecked must name source, mint, destination and authority only, not %d accounts", len(tr.Accounts))
	}
	p.Source, p.Mint, p.Destination, p.Payer = keys[tr.Accounts[0]], keys[tr.Accounts[1]], keys[tr.Accounts[2]], keys[tr.Accounts[3]]
	p.Amount = binary.LittleEndian.Uint64(data(2)[1:9])
	p.Decimals = data(2)[9]
	if !keys[1].Equals(p.Payer) {
		return nil, refuse(ExactExcessiveSigners, "the signer beside the fee payer must be the transfer's authority")
	}

	for i := 3; i < len(msg.Instructions); i++ {
		switch {
		case program(i).Equals(MemoProgramID):
			if len(msg.Instructions[i].Accounts) != 0 || len(data(i)) > ExactMaxMemoBytes {
				return nil, refuse(ExactUnknownInstruction, "instruction %d: a memo takes no accounts and at most %d bytes", i, ExactMaxMemoBytes)
			}
			p.Memos = append(p.Memos, data(i))
		case program(i).Equals(LighthouseProgramID):
		default:
			return nil, refuse(ExactUnknownInstruction, "instruction %d calls %s, not the memo or Lighthouse program", i, program(i))
		}
	}
	// The fee payer signs for the fee and nothing else: no instruction
	// may name it, as an account or a program.
	for i, ix := range msg.Instructions {
		for _, a := range ix.Accounts {
			if a == 0 {
				return nil, refuse(ExactFeePayerInvolved, "the fee payer is an account of instruction %d", i)
			}
		}
	}
	return p, nil
}

// Transaction is the payload's transaction as the payer signed it, base64.
func (p *ExactPayment) Transaction() string {
	raw, _ := p.tx.MarshalBinary()
	return base64.StdEncoding.EncodeToString(raw)
}

// ExactRequirements is what an exact payment must pay.
type ExactRequirements struct {
	FeePayer solana.PublicKey
	// PayTo is the recipient's owner address; the transfer goes to its
	// associated token account for Mint.
	PayTo    solana.PublicKey
	Mint     solana.PublicKey
	Decimals uint8
	Amount   uint64
	// Memo, when set, must be the data of the one memo instruction.
	Memo string
}

// Verify checks the payment against req and the payer's signature; it
// reads nothing from the chain (SettleExact does).
func (p *ExactPayment) Verify(req ExactRequirements) error {
	if !p.FeePayer.Equals(req.FeePayer) {
		return refuse(ExactFeePayerMismatch, "the fee payer must be %s, not %s", req.FeePayer, p.FeePayer)
	}
	if p.Payer.Equals(req.FeePayer) {
		return refuse(ExactFeePayerInvolved, "the fee payer cannot be the transfer's authority")
	}
	if !ed25519.Verify(ed25519.PublicKey(p.Payer[:]), p.message, p.tx.Signatures[1][:]) {
		return refuse(ExactSignatureInvalid, "the payer %s's signature does not verify over the message", p.Payer)
	}
	if p.ComputeUnitLimit > ExactMaxComputeUnitLimit {
		return refuse(ExactComputeLimitTooHigh, "compute unit limit %d is above %d", p.ComputeUnitLimit, ExactMaxComputeUnitLimit)
	}
	if p.ComputeUnitPrice > ExactMaxComputeUnitPrice {
		return refuse(ExactComputePriceTooHigh, "compute unit price %d micro-lamports is above %d", p.ComputeUnitPrice, ExactMaxComputeUnitPrice)
	}
	if !p.Mint.Equals(req.Mint) {
		return refuse(ExactMintMismatch, "the transfer's mint must be %s, not %s", req.Mint, p.Mint)
	}
	if p.Decimals != req.Decimals {
		return refuse(ExactMintMismatch, "the transfer's decimals must be %d, not %d", req.Decimals, p.Decimals)
	}
	dest, err := associatedTokenAddress(req.PayTo, req.Mint)
	if err != nil {
		return refuse(ExactRecipientMismatch, "payTo %s has no associated token address", req.PayTo)
	}
	if !p.Destination.Equals(dest) {
		return refuse(ExactRecipientMismatch, "the transfer must go to %s (payTo %s's token account), not %s", dest, req.PayTo, p.Destination)
	}
	if feeATA, err := associatedTokenAddress(req.FeePayer, req.Mint); err == nil && p.Source.Equals(feeATA) {
		return refuse(ExactFeePayerInvolved, "the transfer's source is the fee payer's token account")
	}
	if p.Source.Equals(p.Destination) {
		return refuse(ExactRecipientMismatch, "the transfer's source is its destination")
	}
	if p.Amount != req.Amount {
		return refuse(ExactAmountMismatch, "the transfer must be %d base units, not %d", req.Amount, p.Amount)
	}
	if req.Memo != "" {
		if len(p.Memos) != 1 {
			return refuse(ExactMemoCount, "must carry one memo, not %d", len(p.Memos))
		}
		if string(p.Memos[0]) != req.Memo {
			return refuse(ExactMemoMismatch, "the memo must be %q", req.Memo)
		}
	}
	return nil
}

// ExactRequirementsFor is what an exact payment of amount to payTo must
// pay on this ledger: its mint and decimals, the treasury as fee payer.
func (l *Ledger) ExactRequirementsFor(payTo string, amount *big.Int, memo string) (ExactRequirements, error) {
	to, err := parseAddress(payTo)
	if err != nil {
		return ExactRequirements{}, err
	}
	if amount == nil || amount.Sign() <= 0 || !amount.IsUint64() {
		return ExactRequirements{}, fmt.Errorf("solana: x402 exact: amount %v is not a positive u64", amount)
	}
	return ExactRequirements{
		FeePayer: l.feePayer.PublicKey(), PayTo: to, Mint: l.mint, Decimals: uint8(l.decimals), Amount: amount.Uint64(), Memo: memo,
	}, nil
}

// ExactSignature is the id the payment's transaction has once the
// treasury signs it: deterministic, so known before anything is sent.
func (l *Ledger) ExactSignature(p *ExactPayment) (string, error) {
	if !p.FeePayer.Equals(l.feePayer.PublicKey()) {
		return "", refuse(ExactFeePayerMismatch, "the fee payer must be %s", l.feePayer.PublicKey())
	}
	sig, err := l.feePayer.Sign(p.message)
	if err != nil {
		return "", fmt.Errorf("solana: x402 exact: signing: %w", err)
	}
	return sig.String(), nil
}

var _ chains.ExactSettler = (*Ledger)(nil)

// ExactPayer is chains.ExactSettler's: the transfer's authority of a
// transaction of the exact layout, its signature unchecked.
func (l *Ledger) ExactPayer(transaction string) string {
	p, err := DecodeExact(transaction)
	if err != nil {
		return ""
	}
	return p.Payer.String()
}

// exactOf decodes transaction and makes req this ledger's requirements.
func (l *Ledger) exactOf(transaction string, req chains.ExactRequest) (*ExactPayment, ExactRequirements, error) {
	p, err := decodeExact(transaction, req.AnyComputeOrder)
	if err != nil {
		return nil, ExactRequirements{}, err
	}
	r, err := l.ExactRequirementsFor(req.PayTo, req.Amount, req.Memo)
	if err != nil {
		return nil, ExactRequirements{}, err
	}
	return p, r, nil
}

// VerifyExact is chains.ExactSettler's: SettleExactPayment's checks,
// nothing signed or sent.
func (l *Ledger) VerifyExact(ctx context.Context, transaction string, req chains.ExactRequest) (chains.ExactChecked, error) {
	p, r, err := l.exactOf(transaction, req)
	if err != nil {
		return chains.ExactChecked{}, err
	}
	if err := p.Verify(r); err != nil {
		return chains.ExactChecked{Payer: p.Payer.String()}, err
	}
	txHash, err := l.ExactSignature(p)
	if err != nil {
		return chains.ExactChecked{}, err
	}
	out := chains.ExactChecked{Payer: p.Payer.String(), TxHash: txHash}
	rc, err := l.Receipt(ctx, txHash)
	if err != nil {
		return chains.ExactChecked{}, err
	}
	if rc.State != chains.TxUnknown {
		out.Known, out.Failed = true, rc.State == chains.TxFailed
		return out, nil
	}
	if err := l.checkBlockhash(ctx, p); err != nil {
		return out, err
	}
	src, err := l.rpc.GetAccountInfoWithOpts(ctx, p.Source, &rpc.GetAccountInfoOpts{Encoding: solana.EncodingBase64, Commitment: l.commitment})
	if err != nil && !errors.Is(err, rpc.ErrNotFound) {
		return chains.ExactChecked{}, fmt.Errorf("solana: x402 exact: reading the source: %w", err)
	}
	var acc *rpc.Account
	if err == nil {
		acc = src.Value
	}
	if a, ok := decodeTokenAccount(acc); !ok || !a.Mint.Equals(r.Mint) || a.Amount < r.Amount {
		return out, ErrInsufficientFunds
	}
	return out, nil
}

// SettleExact is chains.ExactSettler's: SettleExactPayment of the decoded
// transaction.
func (l *Ledger) SettleExact(ctx context.Context, transaction string, req chains.ExactRequest) (chains.ExactSettled, error) {
	p, r, err := l.exactOf(transaction, req)
	if err != nil {
		return chains.ExactSettled{}, err
	}
	return l.SettleExactPayment(ctx, p, r)
}

func (l *Ledger) checkBlockhash(ctx context.Context, p *ExactPayment) error {
	valid, err := l.rpc.IsBlockhashValid(ctx, p.Blockhash, l.commitment)
	if err != nil {
		return fmt.Errorf("solana: x402 exact: checking the blockhash: %w", err)
	}
	if !valid.Value {
		return refuse(ExactBlockhashExpired, "the transaction's blockhash %s is no longer valid: sign it again with a recent one", p.Blockhash)
	}
	return nil
}

// SettleExactPayment verifies p against req, co-signs it as the fee payer and
// sends it. The transaction already sent (a retry of the same payload)
// answers its signature again without a second send; a blockhash no
// longer valid, a source short of the amount or a failing simulation is
// an ExactRefusal, nothing sent. When payTo's token account does not
// exist yet the treasury creates it first (its rent is the treasury's,
// recovered when the deposit account is closed), after checking the
// payer holds the amount, so a payer that cannot pay costs no rent.
func (l *Ledger) SettleExactPayment(ctx context.Context, p *ExactPayment, req ExactRequirements) (chains.ExactSettled, error) {
	if err := p.Verify(req); err != nil {
		return chains.ExactSettled{}, err
	}
	txHash, err := l.ExactSignature(p)
	if err != nil {
		return chains.ExactSettled{}, err
	}
	out := chains.ExactSettled{Submitted: chains.Submitted{TxHash: txHash, From: p.Payer.String()}}
	if r, err := l.Receipt(ctx, txHash); err != nil {
		return chains.ExactSettled{}, err
	} else if r.State != chains.TxUnknown {
		return out, nil
	}
	if err := l.checkBlockhash(ctx, p); err != nil {
		return chains.ExactSettled{}, err
	}
	height, err := l.rpc.GetBlockHeight(ctx, l.commitment)
	if err != nil {
		return chains.ExactSettled{}, fmt.Errorf("solana: x402 exact: reading the block height: %w", err)
	}
	if out.AccountTx, err = l.ensureDestination(ctx, p, req); err != nil {
		return chains.ExactSettled{AccountTx: out.AccountTx}, err
	}
	signed := *p.tx
	signed.Signatures = append([]solana.Signature(nil), p.tx.Signatures...)
	signed.Signatures[0] = solana.MustSignatureFromBase58(txHash)
	// The blockhash is at most 150 blocks old and lands, if ever, within
	// 150 blocks of being made: by height+151 it no longer can.
	sig := signed.Signatures[0]
	l.sent.add(sig, height+151)
	_, err = l.rpc.SendTransactionWithOpts(ctx, &signed, rpc.TransactionOpts{PreflightCommitment: l.commitment})
	if err != nil {
		if sendErr := asSendError(err, 2); sendErr != nil {
			l.sent.remove(sig)
			if errors.Is(sendErr, chains.ErrInsufficientFunds) {
				return chains.ExactSettled{AccountTx: out.AccountTx}, sendErr
			}
			return chains.ExactSettled{AccountTx: out.AccountTx}, refuse(ExactSimulationFailed, "the transaction fails: %s", sendErr.Message)
		}
		return out, fmt.Errorf("solana: x402 exact: send %s: %w", txHash, err)
	}
	return out, nil
}

// ensureDestination creates payTo's token account when it has none,
// once the source is seen to hold the amount, and answers the creating
// transaction ("" when none was sent).
func (l *Ledger) ensureDestination(ctx context.Context, p *ExactPayment, req ExactRequirements) (string, error) {
	accounts, err := l.rpc.GetMultipleAccountsWithOpts(ctx, []solana.PublicKey{p.Source, p.Destination},
		&rpc.GetMultipleAccountsOpts{Encoding: solana.EncodingBase64, Commitment: l.commitment})
	if err != nil {
		return "", fmt.Errorf("solana: x402 exact: reading the token accounts: %w", err)
	}
	if len(accounts.Value) != 2 {
		return "", errors.New("solana: x402 exact: reading the token accounts: short answer")
	}
	src, ok := decodeTokenAccount(accounts.Value[0])
	if !ok || !src.Mint.Equals(req.Mint) || src.Amount < req.Amount {
		return "", ErrInsufficientFunds
	}
	if accounts.Value[1] != nil {
		return "", nil
	}
	sub, err := l.createTokenAccount(ctx, req.PayTo)
	if err != nil {
		return "", fmt.Errorf("solana: x402 exact: creating payTo's token account: %w", err)
	}
	rc, err := l.Wait(ctx, sub)
	if err != nil {
		return sub, fmt.Errorf("solana: x402 exact: creating payTo's token account: %w", err)
	}
	if rc.State != chains.TxIncluded {
		return sub, fmt.Errorf("solana: x402 exact: creating payTo's token account: %s %s", rc.State, rc.Err)
	}
	return sub, nil
}

// createTokenAccount sends the treasury's idempotent create of owner's
// associated token account.
func (l *Ledger) createTokenAccount(ctx context.Context, owner solana.PublicKey) (string, error) {
	ata, err := associatedTokenAddress(owner, l.mint)
	if err != nil {
		return "", err
	}
	feePayer := l.feePayer.PublicKey()
	create := solana.NewInstruction(solana.SPLAssociatedTokenAccountProgramID, solana.AccountMetaSlice{
		solana.Meta(feePayer).WRITE().SIGNER(), solana.Meta(ata).WRITE(), solana.Meta(owner), solana.Meta(l.mint),
		solana.Meta(solana.SystemProgramID), solana.Meta(solana.TokenProgramID),
	}, []byte{1})
	bh, err := l.rpc.GetLatestBlockhash(ctx, l.commitment)
	if err != nil {
		return "", err
	}
	tx, err := solana.NewTransaction([]solana.Instruction{create}, bh.Value.Blockhash, solana.TransactionPayer(feePayer))
	if err != nil {
		return "", err
	}
	if _, err := tx.Sign(func(pk solana.PublicKey) *solana.PrivateKey {
		if pk.Equals(feePayer) {
			return &l.feePayer
		}
		return nil
	}); err != nil {
		return "", err
	}
	l.sent.add(tx.Signatures[0], bh.Value.LastValidBlockHeight)
	if _, err := l.rpc.SendTransactionWithOpts(ctx, tx, rpc.TransactionOpts{PreflightCommitment: l.commitment}); err != nil {
		l.sent.remove(tx.Signatures[0])
		return "", err
	}
	return tx.Signatures[0].String(), nil
}
