// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

import {ERC20} from "@openzeppelin/contracts/token/ERC20/ERC20.sol";
import {Ownable} from "@openzeppelin/contracts/access/Ownable.sol";
import {EIP712} from "@openzeppelin/contracts/utils/cryptography/EIP712.sol";
import {ECDSA} from "@openzeppelin/contracts/utils/cryptography/ECDSA.sol";

/// @title USDC for agentpay's local devnets
/// @notice A test token that is ABI- and EIP-712-compatible with Circle's
/// FiatToken v2 for everything agentpay uses: ERC-20, 6 decimals, the
/// "USD Coin" / version "2" EIP-712 domain and EIP-3009 authorizations, so
/// code written against real USDC runs unchanged on the devnet. The revert
/// messages of the EIP-3009 paths are FiatToken's, so callers that match on
/// them behave the same. Minting is restricted to the owner (the deployer,
/// the devnet faucet); there are no minter roles, blacklist or pause.
contract USDC is ERC20, Ownable, EIP712 {
    // The type strings are EIP-3009's exactly; the compiler folds the hashes into constants.
    bytes32 public constant TRANSFER_WITH_AUTHORIZATION_TYPEHASH =
        keccak256(
            "TransferWithAuthorization(address from,address to,uint256 value,uint256 validAfter,uint256 validBefore,bytes32 nonce)"
        );
    bytes32 public constant RECEIVE_WITH_AUTHORIZATION_TYPEHASH =
        keccak256(
            "ReceiveWithAuthorization(address from,address to,uint256 value,uint256 validAfter,uint256 validBefore,bytes32 nonce)"
        );
    bytes32 public constant CANCEL_AUTHORIZATION_TYPEHASH = keccak256("CancelAuthorization(address authorizer,bytes32 nonce)");

    /// @dev authorizer => nonce => used or cancelled. Nonces are random
    /// 32-byte values chosen by the signer, not a counter, so independent
    /// authorizations can be relayed in any order.
    mapping(address => mapping(bytes32 => bool)) private _authorizationStates;

    event AuthorizationUsed(address indexed authorizer, bytes32 indexed nonce);
    event AuthorizationCanceled(address indexed authorizer, bytes32 indexed nonce);

    constructor() ERC20("USD Coin", "USDC") Ownable(msg.sender) EIP712("USD Coin", "2") {}

    /// @notice USDC has 6 decimals on every chain agentpay supports.
    function decimals() public pure override returns (uint8) {
        return 6;
    }

    /// @notice FiatToken's version string, also the EIP-712 domain version.
    function version() external pure returns (string memory) {
        return "2";
    }

    /// @notice The EIP-712 domain separator for this chain and contract.
    // solhint-disable-next-line func-name-mixedcase
    function DOMAIN_SEPARATOR() external view returns (bytes32) {
        return _domainSeparatorV4();
    }

    /// @notice Creates tokens; only the owner (the devnet faucet) may mint.
    function mint(address to, uint256 amount) external onlyOwner returns (bool) {
        require(amount > 0, "FiatToken: mint amount not greater than 0");
        _mint(to, amount);
        return true;
    }

    /// @notice Whether an authorization nonce of an authorizer is used or cancelled.
    function authorizationState(address authorizer, bytes32 nonce) external view returns (bool) {
        return _authorizationStates[authorizer][nonce];
    }

    /// @notice EIP-3009: executes a transfer signed by `from`; anyone may submit it and pay the gas.
    function transferWithAuthorization(
        address from,
        address to,
        uint256 value,
        uint256 validAfter,
        uint256 validBefore,
        bytes32 nonce,
        uint8 v,
        bytes32 r,
        bytes32 s
    ) external {
        _requireValidAuthorization(from, nonce, validAfter, validBefore);
        bytes32 structHash = keccak256(
            abi.encode(TRANSFER_WITH_AUTHORIZATION_TYPEHASH, from, to, value, validAfter, validBefore, nonce)
        );
        _requireValidSignature(from, structHash, v, r, s);
        _markAuthorizationAsUsed(from, nonce);
        _transfer(from, to, value);
    }

    /// @notice EIP-3009: like transferWithAuthorization but only the payee may submit it,
    /// which stops a front-runner from executing an authorization meant for a contract call.
    function receiveWithAuthorization(
        address from,
        address to,
        uint256 value,
        uint256 validAfter,
        uint256 validBefore,
        bytes32 nonce,
        uint8 v,
        bytes32 r,
        bytes32 s
    ) external {
        require(to == msg.sender, "FiatTokenV2: caller must be the payee");
        _requireValidAuthorization(from, nonce, validAfter, validBefore);
        bytes32 structHash = keccak256(
            abi.encode(RECEIVE_WITH_AUTHORIZATION_TYPEHASH, from, to, value, validAfter, validBefore, nonce)
        );
        _requireValidSignature(from, structHash, v, r, s);
        _markAuthorizationAsUsed(from, nonce);
        _transfer(from, to, value);
    }

    /// @notice EIP-3009: the authorizer voids an unused authorization.
    function cancelAuthorization(address authorizer, bytes32 nonce, uint8 v, bytes32 r, bytes32 s) external {
        _requireUnusedAuthorization(authorizer, nonce);
        bytes32 structHash = keccak256(abi.encode(CANCEL_AUTHORIZATION_TYPEHASH, authorizer, nonce));
        _requireValidSignature(authorizer, structHash, v, r, s);
        _authorizationStates[authorizer][nonce] = true;
        emit AuthorizationCanceled(authorizer, nonce);
    }

    function _requireValidSignature(address signer, bytes32 structHash, uint8 v, bytes32 r, bytes32 s) private view {
        // tryRecover rather than recover: a bad signature must revert with
        // FiatToken's message, not OpenZeppelin's custom error.
        (address recovered, ECDSA.RecoverError err, ) = ECDSA.tryRecover(_hashTypedDataV4(structHash), v, r, s);
        require(err == ECDSA.RecoverError.NoError && recovered == signer, "FiatTokenV2: invalid signature");
    }

    function _requireUnusedAuthorization(address authorizer, bytes32 nonce) private view {
        require(!_authorizationStates[authorizer][nonce], "FiatTokenV2: authorization is used or canceled");
    }

    function _requireValidAuthorization(
        address authorizer,
        bytes32 nonce,
        uint256 validAfter,
        uint256 validBefore
    ) private view {
        require(block.timestamp > validAfter, "FiatTokenV2: authorization is not yet valid");
        require(block.timestamp < validBefore, "FiatTokenV2: authorization is expired");
        _requireUnusedAuthorization(authorizer, nonce);
    }

    function _markAuthorizationAsUsed(address authorizer, bytes32 nonce) private {
        _authorizationStates[authorizer][nonce] = true;
        emit AuthorizationUsed(authorizer, nonce);
    }
}
