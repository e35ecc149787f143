package agentpay

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"hash/fnv"

	"github.com/google/uuid"

	"agentpay/chains"
	"agentpay/ent"
	"agentpay/ent/depositaddress"
)

// maxDerivationIndex is the first index that cannot be used:
// chains.Wallets.DeriveKey takes indexes below 2^31.
const maxDerivationIndex = 1 << 31

// deriveDepositKey derives the key and address of a deposit address from the
// vault's deposit seed, one derivation path per chain family, so derivation
// indexes are unique per family (an index used on base is not used again on
// arbitrum: the same key would otherwise receive on both chains). The key is
// what a sweep signs with; it is never stored.
func (s *Service) deriveDepositKey(family chains.Family, index int64) (key []byte, address string, err error) {
	if index < 0 || index >= maxDerivationIndex {
		return nil, "", fmt.Errorf("deposit derivation index %d out of range", index)
	}
	w, ok := s.cfg.Families[family]
	if !ok {
		return nil, "", fmt.Errorf("unknown chain family %q", family)
	}
	return w.DeriveKey(s.cfg.Vault.DepositSeed(), uint32(index))
}

// DepositAddressKey re-derives the key of a stored deposit address and
// checks that it still yields the stored address, so a changed master key or
// a damaged row is caught before anything is signed with it.
func (s *Service) DepositAddressKey(da *ent.DepositAddress) ([]byte, error) {
	key, addr, err := s.deriveDepositKey(chains.Family(da.ChainFamily), da.DerivationIndex)
	if err != nil {
		return nil, err
	}
	if addr != da.Address {
		return nil, fmt.Errorf("deposit address %s: index %d of family %s derives another address (was MASTER_KEY changed?)",
			da.ID, da.DerivationIndex, da.ChainFamily)
	}
	return key, nil
}

// allocateDepositAddress takes the next derivation index of the chain's
// family, derives the address and stores it for the session, inside the
// caller's transaction (ctx must carry a WithTx transaction).
//
// Concurrency: the index is max+1 of the family. On PostgreSQL a transaction
// advisory lock per family serialises allocators across every process until
// commit, so two transactions never compute the same max; on SQLite the
// single connection and BEGIN IMMEDIATE already serialise writers. The unique
// index (chain_family, derivation_index) is the last word either way: a
// violation (which the lock should make impossible) is returned as
// errIndexTaken for the caller to retry in a fresh transaction.
func (s *Service) allocateDepositAddress(ctx context.Context, tx *ent.Tx, sqlTx *sql.Tx, sessionID uuid.UUID, chain chains.Name) (*ent.DepositAddress, error) {
	family := chain.Family()
	if s.cfg.DB.IsPostgres() {
		if _, err := sqlTx.ExecContext(ctx, "SELECT pg_advisory_xact_lock($1)", depositLockKey(family)); err != nil {
			return nil, fmt.Errorf("locking deposit index of %s: %w", family, err)
		}
	}
	last, err := tx.DepositAddress.Query().
		Where(depositaddress.ChainFamily(string(family))).
		Order(ent.Desc(depositaddress.FieldDerivationIndex)).
		Limit(1).
		Select(depositaddress.FieldDerivationIndex).
		Ints(ctx)
	if err != nil {
		return nil, err
	}
	next := int64(0)
	if len(last) > 0 {
		next = int64(last[0]) + 1
	}
	if next >= maxDerivationIndex {
		return nil, fmt.Errorf("%w: no deposit addresses left for %s", ErrUnavailable, family)
	}
	_, address, err := s.deriveDepositKey(family, next)
	if err != nil {
		return nil, err
	}
	da, err := tx.DepositAddress.Create().
		SetSessionID(sessionID).
		SetChain(string(chain)).
		SetChainFamily(string(family)).
		SetAddress(address).
		SetDerivationIndex(next).
		Save(ctx)
	if isUniqueViolation(err, "depositaddress_chain_family_derivation_index", "deposit_addresses.chain_family, deposit_addresses.derivation_index") {
		return nil, errIndexTaken
	}
	return da, err
}

// errIndexTaken: another transaction took the derivation index; retry.
var errIndexTaken = errors.New("deposit derivation index taken concurrently")

// depositLockKey is the PostgreSQL advisory lock key of a family's index
// counter: a stable 64-bit hash, so every process agrees on it.
func depositLockKey(family chains.Family) int64 {
	h := fnv.New64a()
	h.Write([]byte("agentpay deposit index " + string(family)))
	return int64(h.Sum64())
}
