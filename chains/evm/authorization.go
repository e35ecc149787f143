package evm

import (
	"crypto/ecdsa"
	"math/big"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/common/math"
	"github.com/ethereum/go-ethereum/crypto"
)

var (
	domainTypeHash = crypto.Keccak256Hash([]byte("EIP712Domain(string name,string version,uint256 chainId,address verifyingContract)"))
	// transferAuthTypeHash is EIP-3009's, identical in FiatToken v2.
	transferAuthTypeHash = crypto.Keccak256Hash([]byte("TransferWithAuthorization(address from,address to,uint256 value,uint256 validAfter,uint256 validBefore,bytes32 nonce)"))
)

// eip712Domain computes an EIP-712 domain separator.
func eip712Domain(name, version string, chainID *big.Int, verifyingContract common.Address) common.Hash {
	return crypto.Keccak256Hash(
		domainTypeHash[:],
		crypto.Keccak256([]byte(name)),
		crypto.Keccak256([]byte(version)),
		math.U256Bytes(new(big.Int).Set(chainID)),
		common.LeftPadBytes(verifyingContract[:], 32),
	)
}

// authorization is an EIP-3009 TransferWithAuthorization.
type authorization struct {
	From        common.Address
	To          common.Address
	Value       *big.Int
	ValidAfter  *big.Int
	ValidBefore *big.Int
	Nonce       [32]byte
}

// digest is the EIP-712 hash the source key signs.
func (a authorization) digest(domain common.Hash) common.Hash {
	structHash := crypto.Keccak256Hash(
		transferAuthTypeHash[:],
		common.LeftPadBytes(a.From[:], 32),
		common.LeftPadBytes(a.To[:], 32),
		math.U256Bytes(new(big.Int).Set(a.Value)),
		math.U256Bytes(new(big.Int).Set(a.ValidAfter)),
		math.U256Bytes(new(big.Int).Set(a.ValidBefore)),
		a.Nonce[:],
	)
	return crypto.Keccak256Hash([]byte("\x19\x01"), domain[:], structHash[:])
}

// calldata signs the authorization with key and packs the
// transferWithAuthorization call that executes it.
func (a authorization) calldata(domain common.Hash, key *ecdsa.PrivateKey) ([]byte, error) {
	d := a.digest(domain)
	sig, err := crypto.Sign(d[:], key)
	if err != nil {
		return nil, err
	}
	var r, s [32]byte
	copy(r[:], sig[:32])
	copy(s[:], sig[32:64])
	v := sig[64] + 27 // ecrecover wants 27/28, crypto.Sign yields 0/1
	return parsedABI.Pack("transferWithAuthorization", a.From, a.To, a.Value, a.ValidAfter, a.ValidBefore, a.Nonce, v, r, s)
}
