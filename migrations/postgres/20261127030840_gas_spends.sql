-- Create "gas_spends" table
CREATE TABLE "gas_spends" ("id" uuid NOT NULL, "created_at" timestamptz NOT NULL, "updated_at" timestamptz NOT NULL, "chain" character varying NOT NULL, "mode" character varying NOT NULL, "tx_hash" character varying NOT NULL, "purpose" character varying NOT NULL, "fee" bigint NOT NULL, "rent" bigint NOT NULL DEFAULT 0, "decimals" integer NOT NULL, PRIMARY KEY ("id"));
-- Create index "gasspend_chain_tx_hash" to table: "gas_spends"
CREATE UNIQUE INDEX "gasspend_chain_tx_hash" ON "gas_spends" ("chain", "tx_hash");
-- Create index "gasspend_mode_chain" to table: "gas_spends"
CREATE INDEX "gasspend_mode_chain" ON "gas_spends" ("mode", "chain");
