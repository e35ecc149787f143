package solana

import (
	"encoding/binary"
	"fmt"

	"github.com/gagliardetto/solana-go"
	"github.com/gagliardetto/solana-go/rpc"
)

// tokenAccount is the part of an SPL token account the adapter reads.
type tokenAccount struct {
	Mint   solana.PublicKey
	Owner  solana.PublicKey
	Amount uint64
}

// splTokenAccountSize is the size of an SPL token account; mint, owner and
// amount are its first 72 bytes.
const splTokenAccountSize = 165

// decodeTokenAccount reads an SPL token account. Reading the three fixed
// fields directly avoids failing on the optional tail fields.
func decodeTokenAccount(acc *rpc.Account) (tokenAccount, bool) {
	if acc == nil || !acc.Owner.Equals(solana.TokenProgramID) || acc.Data == nil {
		return tokenAccount{}, false
	}
	data := acc.Data.GetBinary()
	if len(data) != splTokenAccountSize {
		return tokenAccount{}, false
	}
	var out tokenAccount
	copy(out.Mint[:], data[0:32])
	copy(out.Owner[:], data[32:64])
	out.Amount = binary.LittleEndian.Uint64(data[64:72])
	return out, true
}

// associatedTokenAddress is the owner's ATA for the mint under the classic
// SPL token program.
func associatedTokenAddress(owner, mint solana.PublicKey) (solana.PublicKey, error) {
	ata, _, err := solana.FindAssociatedTokenAddress(owner, mint)
	if err != nil {
		return solana.PublicKey{}, fmt.Errorf("solana: associated token address of %s: %w", owner, err)
	}
	return ata, nil
}
