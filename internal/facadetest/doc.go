// Package facadetest holds tests that drive REST, GraphQL and MCP against
// one service at once (one Idempotency-Key across them, say). They live
// outside the facades so that none of the facades, nor its tests, depends
// on another (internal/httpx's TestFacadesShareTheVocabulary).
package facadetest
