-- Create "dust_deposits" table
CREATE TABLE "dust_deposits" ("id" uuid NOT NULL, "created_at" timestamptz NOT NULL, "updated_at" timestamptz NOT NULL, "deposit_address_id" uuid NOT NULL, "chain" character varying NOT NULL, "livemode" boolean NOT NULL, "tx_hash" character varying NOT NULL, "log_index" bigint NOT NULL, "from_address" character varying NULL, "amount" bigint NOT NULL, "block_number" bigint NOT NULL, "sweep_id" uuid NULL, "sweep_submitted_at" timestamptz NULL, "sweep_tx_hash" character varying NULL, "swept_at" timestamptz NULL, PRIMARY KEY ("id"));
-- Create index "dustdeposit_chain_tx_hash_log_index" to table: "dust_deposits"
CREATE UNIQUE INDEX "dustdeposit_chain_tx_hash_log_index" ON "dust_deposits" ("chain", "tx_hash", "log_index");
-- Create index "dustdeposit_deposit_address_id_swept_at" to table: "dust_deposits"
CREATE INDEX "dustdeposit_deposit_address_id_swept_at" ON "dust_deposits" ("deposit_address_id", "swept_at");
-- Create index "dustdeposit_sweep_id" to table: "dust_deposits"
CREATE INDEX "dustdeposit_sweep_id" ON "dust_deposits" ("sweep_id");
