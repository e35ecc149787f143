-- Create "fundings" table
CREATE TABLE "fundings" ("id" uuid NOT NULL, "created_at" timestamptz NOT NULL, "updated_at" timestamptz NOT NULL, "chain" character varying NOT NULL, "mode" character varying NOT NULL, "address" character varying NOT NULL, "amount" bigint NOT NULL, "tx_hash" character varying NOT NULL, "source" character varying NOT NULL, PRIMARY KEY ("id"));
-- Create index "funding_chain_tx_hash_address" to table: "fundings"
CREATE UNIQUE INDEX "funding_chain_tx_hash_address" ON "fundings" ("chain", "tx_hash", "address");
-- Create index "funding_mode_chain" to table: "fundings"
CREATE INDEX "funding_mode_chain" ON "fundings" ("mode", "chain");
