package agentpay

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"time"

	"github.com/google/uuid"

	"agentpay/cardissuer"
	"agentpay/chains"
	"agentpay/ent"
	"agentpay/ent/cardrequest"
	"agentpay/ent/transfer"
)

// A card request after its approval (cards.go has the lifecycle): the card
// is issued once the reservation is included, a request or card whose time
// ran out ends, and what was not charged returns, once, by the cards job.

// advanceCard moves an approved request on as far as its reservation
// allows: failed when the transfer failed (nothing moved), a card issued
// once it completed. Idempotent: the request's request runs it, and the
// cards job for whatever a crash or a slow chain left.
func (s *Service) advanceCard(ctx context.Context, id uuid.UUID) error {
	r, err := s.cfg.DB.Ent.CardRequest.Get(ctx, id)
	if err != nil {
		return err
	}
	if r.Status != cardrequest.StatusApproved || r.CardToken != nil || r.ReserveTransferID == nil {
		return nil
	}
	t, err := s.cfg.DB.Ent.Transfer.Get(ctx, *r.ReserveTransferID)
	if err != nil {
		return fmt.Errorf("card request %s: reservation: %w", r.ID, err)
	}
	switch t.Status {
	case transfer.StatusFailed:
		return s.failCard(ctx, r, "the reservation failed on chain, nothing moved: "+t.Error)
	case transfer.StatusCompleted:
		return s.issueCard(ctx, r)
	}
	return nil // in flight: the reconciler finishes it, the job comes back
}

// failCard ends an approved request whose reservation moved nothing.
func (s *Service) failCard(ctx context.Context, r *ent.CardRequest, reason string) error {
	if len(reason) > 500 {
		reason = reason[:500]
	}
	return s.cfg.DB.WithTx(ctx, func(ctx context.Context, tx *ent.Tx, sqlTx *sql.Tx) error {
		n, err := tx.CardRequest.Update().
			Where(cardrequest.ID(r.ID), cardrequest.StatusEQ(cardrequest.StatusApproved), cardrequest.CardTokenIsNil()).
			SetStatus(cardrequest.StatusFailed).SetError(reason).Save(ctx)
		if err != nil || n == 0 {
			return err
		}
		r.Status, r.Error = cardrequest.StatusFailed, reason
		return s.recordCardEvents(ctx, tx, sqlTx, r, EventCardFailed, cardEventDataOf(r, "", reason))
	})
}

// issueCard asks the issuer for the card (outside any transaction; the
// issuer answers the same card for the same request) and stores it
// sealed, with its one-time token, once.
func (s *Service) issueCard(ctx context.Context, r *ent.CardRequest) error {
	now := s.now().UTC()
	expires := now.Add(s.cardLifetime())
	card, err := s.cfg.CardIssuer.Issue(ctx, cardissuer.IssueRequest{
		RequestID: r.ID.String(), MaxAmountCents: r.Amount / 10_000, Merchant: r.MerchantName, ExpiresAt: expires,
	})
	if errors.Is(err, cardissuer.ErrRefused) {
		// Nothing to charge: the money goes back as for an unused card.
		return s.endUnusedCard(ctx, r, "the card issuer refused the card: "+err.Error())
	}
	if err != nil {
		return fmt.Errorf("issuing card: %w", err)
	}
	if card.ExpiresAt.After(expires) || card.ExpiresAt.IsZero() {
		card.ExpiresAt = expires
	}
	plain, err := json.Marshal(CardDetails{Number: card.Number, ExpMonth: card.ExpMonth, ExpYear: card.ExpYear, CVC: card.CVC})
	if err != nil {
		return err
	}
	sealed, err := s.cfg.Vault.Seal(plain, cardSealAD(r.ID))
	clear(plain)
	if err != nil {
		return fmt.Errorf("sealing card: %w", err)
	}
	token := ctokFormat.New()
	cardExpires := card.ExpiresAt.UTC().Truncate(time.Microsecond)
	return s.cfg.DB.WithTx(ctx, func(ctx context.Context, tx *ent.Tx, sqlTx *sql.Tx) error {
		n, err := tx.CardRequest.Update().
			Where(cardrequest.ID(r.ID), cardrequest.StatusEQ(cardrequest.StatusApproved), cardrequest.CardTokenIsNil()).
			SetCardReference(card.Reference).SetCardToken(token).SetCardLast4(card.Last4()).
			SetCardSealed(sealed).SetCardExpiresAt(cardExpires).Save(ctx)
		if err != nil || n == 0 {
			return err
		}
		r.CardReference, r.CardToken, r.CardLast4, r.CardExpiresAt = &card.Reference, &token, card.Last4(), &cardExpires
		return s.recordCardEvents(ctx, tx, sqlTx, r, EventCardIssued, cardEventDataOf(r, "",
			fmt.Sprintf("A single-use card ending %s for up to %s USD at %s is ready: read it once with %s.",
				card.Last4(), usd(USDCAmount(r.Amount)), r.MerchantName, ActionReadCardRequest.Mark(r.ID.String()))))
	})
}

// endUnusedCard moves an approved request to expired_unused and queues
// the return of its whole amount.
func (s *Service) endUnusedCard(ctx context.Context, r *ent.CardRequest, reason string) error {
	ended := false
	err := s.cfg.DB.WithTx(ctx, func(ctx context.Context, tx *ent.Tx, sqlTx *sql.Tx) error {
		n, err := tx.CardRequest.Update().
			Where(cardrequest.ID(r.ID), cardrequest.StatusEQ(cardrequest.StatusApproved)).
			SetStatus(cardrequest.StatusExpiredUnused).SetRefundAmount(r.Amount).ClearCardSealed().
			SetError(reason).Save(ctx)
		if err != nil || n == 0 {
			return err
		}
		ended = true
		r.Status, r.RefundAmount, r.Error = cardrequest.StatusExpiredUnused, r.Amount, reason
		d := cardEventDataOf(r, "", reason+fmt.Sprintf("; %s USDC returns to the agent's wallet.", usd(USDCAmount(r.Amount))))
		d.ReturnedUSD = json.Number(USDCAmount(r.Amount).String())
		return s.recordCardEvents(ctx, tx, sqlTx, r, EventCardExpiredUnused, d)
	})
	if err != nil {
		return err
	}
	if ended && r.CardReference != nil {
		if err := s.cfg.CardIssuer.Close(ctx, *r.CardReference); err != nil {
			s.logger.WarnContext(ctx, "closing expired card", "request", r.ID, "err", err)
		}
	}
	return nil
}

// cardReturnRef is the fixed ref of a request's return: every retry
// carries it, so the chain takes it once.
func cardReturnRef(id uuid.UUID) [32]byte {
	return sha256.Sum256(append([]byte("agentpay/card-return/"), id[:]...))
}

// cardSolanaResendAfter: a Solana return broadcast without a recorded
// outcome is sent again only once its blockhash has surely expired.
const cardSolanaResendAfter = 3 * time.Minute

// returnCardFunds pays a used or expired card's unspent amount from the
// treasury back to the wallet the reservation left, and records it once
// included (card.returned). It answers whether the return is done.
func (s *Service) returnCardFunds(ctx context.Context, id uuid.UUID, wait time.Duration) (bool, error) {
	r, err := s.cfg.DB.Ent.CardRequest.Get(ctx, id)
	if err != nil {
		return false, err
	}
	if r.RefundAmount <= 0 || r.RefundedAt != nil ||
		(r.Status != cardrequest.StatusUsed && r.Status != cardrequest.StatusExpiredUnused) {
		return r.RefundedAt != nil, nil
	}
	chain := chains.Name(r.RefundChain)
	ledger, err := s.agentLedger(chain)
	if err != nil {
		return false, err
	}
	treasury := s.cfg.Treasury.Address(chain)
	ref := cardReturnRef(r.ID)
	amount := big.NewInt(r.RefundAmount)
	waitFor := func(hash string) (bool, error) {
		wctx, cancel := context.WithTimeout(ctx, wait)
		defer cancel()
		rc, err := ledger.Wait(wctx, hash)
		if err != nil {
			if wctx.Err() != nil && ctx.Err() == nil {
				return false, nil
			}
			return false, err
		}
		switch rc.State {
		case chains.TxIncluded:
			return true, s.completeCardReturn(ctx, r, hash)
		case chains.TxFailed:
			// Moved nothing: forget the hash, the next run sends again.
			return false, s.cfg.DB.Ent.CardRequest.UpdateOneID(r.ID).Where(cardrequest.RefundedAtIsNil()).
				SetRefundTxHash("").ClearRefundSentAt().Exec(ctx)
		}
		return false, nil
	}
	if r.RefundTxHash != "" {
		rc, err := ledger.Receipt(ctx, r.RefundTxHash)
		if err != nil {
			return false, err
		}
		switch rc.State {
		case chains.TxIncluded:
			return true, s.completeCardReturn(ctx, r, r.RefundTxHash)
		case chains.TxPending:
			return waitFor(r.RefundTxHash)
		}
	}
	hash, found, err := ledger.FindTransfer(ctx, chains.TransferQuery{From: treasury, To: r.RefundTo, Amount: amount, Ref: ref})
	if err != nil {
		return false, err
	}
	if found {
		if err := s.cfg.DB.Ent.CardRequest.UpdateOneID(r.ID).SetRefundTxHash(hash).Exec(ctx); err != nil {
			return false, err
		}
		return waitFor(hash)
	}
	if chain == chains.Solana && r.RefundSentAt != nil && s.now().Sub(*r.RefundSentAt) < cardSolanaResendAfter {
		return false, nil // an earlier broadcast may still land
	}
	if err := s.cfg.DB.Ent.CardRequest.UpdateOneID(r.ID).Where(cardrequest.RefundedAtIsNil()).
		SetRefundSentAt(s.now().UTC()).Exec(ctx); err != nil {
		return false, err
	}
	key := append([]byte(nil), s.cfg.Treasury.Key(chain)...)
	defer clear(key)
	sub, err := ledger.Transfer(ctx, chains.TransferRequest{Key: key, To: r.RefundTo, Amount: amount, Ref: ref})
	switch {
	case sub.TxHash != "":
		if err := s.cfg.DB.Ent.CardRequest.UpdateOneID(r.ID).SetRefundTxHash(sub.TxHash).Exec(context.WithoutCancel(ctx)); err != nil {
			return false, err
		}
		return waitFor(sub.TxHash)
	case errors.Is(err, chains.ErrAlreadyUsed):
		return false, nil // landed meanwhile: found on the next run
	case err != nil:
		return false, fmt.Errorf("card return: %w", err)
	}
	return false, errors.New("card return: no transaction hash")
}

// completeCardReturn records an included return once.
func (s *Service) completeCardReturn(ctx context.Context, r *ent.CardRequest, hash string) error {
	return s.cfg.DB.WithTx(ctx, func(ctx context.Context, tx *ent.Tx, sqlTx *sql.Tx) error {
		now := s.now().UTC().Truncate(time.Microsecond)
		n, err := tx.CardRequest.Update().Where(cardrequest.ID(r.ID), cardrequest.RefundedAtIsNil()).
			SetRefundedAt(now).SetRefundTxHash(hash).Save(ctx)
		if err != nil || n == 0 {
			return err
		}
		d := cardEventDataOf(r, "", fmt.Sprintf("%s USDC returned to the agent's wallet on %s.", usd(USDCAmount(r.RefundAmount)), r.RefundChain))
		d.ReturnedUSD, d.TxHash = json.Number(USDCAmount(r.RefundAmount).String()), hash
		return s.recordCardEvents(ctx, tx, sqlTx, r, EventCardReturned, d)
	})
}

// CardsTickStats counts what one CardsTick did.
type CardsTickStats struct {
	Expired, ExpiredUnused, Advanced, Returned int
}

// cardsTickBatch bounds each step of one tick.
const cardsTickBatch = 100

// CardsTick is the cards job: it expires pending requests past their
// deadline and approved cards past theirs (queuing their return), issues
// the cards of reservations that completed and fails those that failed,
// and drives pending returns. Every step is a conditional update from the
// state it leaves, so running it twice, or on two workers at once, or
// after a crash, does each thing once.
func (s *Service) CardsTick(ctx context.Context) (CardsTickStats, error) {
	var st CardsTickStats
	if !s.CardsOn() {
		return st, nil
	}
	now := s.now().UTC().Truncate(time.Microsecond)
	pending, err := s.cfg.DB.Ent.CardRequest.Query().
		Where(cardrequest.StatusEQ(cardrequest.StatusPendingApproval), cardrequest.ExpiresAtLTE(now)).
		Limit(cardsTickBatch).All(ctx)
	if err != nil {
		return st, fmt.Errorf("reading card requests: %w", err)
	}
	for _, r := range pending {
		ok, err := s.expireCardRequest(ctx, r, now)
		if err != nil {
			return st, err
		}
		if ok {
			st.Expired++
		}
	}
	// Only the approved requests with something to do: a card past its
	// expiry, or no card yet. (Cards waiting for their charge would fill
	// a batch and starve the others.)
	var errs []error
	ended, err := s.cfg.DB.Ent.CardRequest.Query().
		Where(cardrequest.StatusEQ(cardrequest.StatusApproved), cardrequest.CardExpiresAtLTE(now)).
		Limit(cardsTickBatch).All(ctx)
	if err != nil {
		return st, fmt.Errorf("reading card requests: %w", err)
	}
	for _, r := range ended {
		if err := s.endUnusedCard(ctx, r, "the card expired unused"); err != nil {
			errs = append(errs, err)
			continue
		}
		st.ExpiredUnused++
	}
	unissued, err := s.cfg.DB.Ent.CardRequest.Query().
		Where(cardrequest.StatusEQ(cardrequest.StatusApproved), cardrequest.CardTokenIsNil()).
		Order(ent.Asc(cardrequest.FieldDecidedAt)).Limit(cardsTickBatch).IDs(ctx)
	if err != nil {
		return st, fmt.Errorf("reading card requests: %w", err)
	}
	for _, id := range unissued {
		if err := s.advanceCard(ctx, id); err != nil {
			errs = append(errs, fmt.Errorf("card request %s: %w", id, err))
			continue
		}
		st.Advanced++
	}
	returns, err := s.cfg.DB.Ent.CardRequest.Query().
		Where(cardrequest.StatusIn(cardrequest.StatusUsed, cardrequest.StatusExpiredUnused),
			cardrequest.RefundAmountGT(0), cardrequest.RefundedAtIsNil()).
		Limit(cardsTickBatch).IDs(ctx)
	if err != nil {
		return st, fmt.Errorf("reading card returns: %w", err)
	}
	for _, id := range returns {
		done, err := s.returnCardFunds(ctx, id, 10*time.Second)
		if err != nil {
			errs = append(errs, fmt.Errorf("card return %s: %w", id, err))
			continue
		}
		if done {
			st.Returned++
		}
	}
	return st, errors.Join(errs...)
}

// expireCardRequest ends a pending request past its deadline (expired):
// nothing was reserved.
func (s *Service) expireCardRequest(ctx context.Context, r *ent.CardRequest, now time.Time) (bool, error) {
	expired := false
	err := s.cfg.DB.WithTx(ctx, func(ctx context.Context, tx *ent.Tx, sqlTx *sql.Tx) error {
		n, err := tx.CardRequest.Update().
			Where(cardrequest.ID(r.ID), cardrequest.StatusEQ(cardrequest.StatusPendingApproval), cardrequest.ExpiresAtLTE(now)).
			SetStatus(cardrequest.StatusExpired).Save(ctx)
		if err != nil || n == 0 {
			return err
		}
		expired = true
		r.Status = cardrequest.StatusExpired
		return s.recordCardEvents(ctx, tx, sqlTx, r, EventCardExpired, cardEventDataOf(r, "", "The request expired undecided; nothing was reserved."))
	})
	if err != nil {
		return false, fmt.Errorf("expiring card request %s: %w", r.ID, err)
	}
	return expired, nil
}
