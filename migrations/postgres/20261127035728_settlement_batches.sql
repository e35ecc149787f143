-- Modify "merchants" table
ALTER TABLE "merchants" ADD COLUMN "settle_held_payments" boolean NOT NULL DEFAULT false;
-- Create "settlement_batches" table
CREATE TABLE "settlement_batches" ("id" uuid NOT NULL, "created_at" timestamptz NOT NULL, "updated_at" timestamptz NOT NULL, "external_id" character varying NOT NULL, "merchant_id" uuid NOT NULL, "livemode" boolean NOT NULL, "chain" character varying NOT NULL, "seq" bigint NOT NULL, "status" character varying NOT NULL DEFAULT 'pending', "gross" bigint NOT NULL, "fee" bigint NOT NULL, "refunds_netted" bigint NOT NULL, "carried_in" bigint NOT NULL, "carried_out" bigint NOT NULL, "net" bigint NOT NULL, "payout_chain" character varying NULL, "payout_address" character varying NULL, "tx_hash" character varying NULL, "reference" character varying NULL, "fx_rate" character varying NULL, "fiat_amount" character varying NULL, "fiat_currency" character varying NULL, "settlement_type" character varying NOT NULL, "error" character varying NULL, "completed_at" timestamptz NULL, PRIMARY KEY ("id"));
-- Create index "settlement_batches_external_id_key" to table: "settlement_batches"
CREATE UNIQUE INDEX "settlement_batches_external_id_key" ON "settlement_batches" ("external_id");
-- Create index "settlementbatch_merchant_id_livemode_chain_seq" to table: "settlement_batches"
CREATE UNIQUE INDEX "settlementbatch_merchant_id_livemode_chain_seq" ON "settlement_batches" ("merchant_id", "livemode", "chain", "seq");
-- Create index "settlementbatch_status" to table: "settlement_batches"
CREATE INDEX "settlementbatch_status" ON "settlement_batches" ("status");
-- Modify "payments" table
ALTER TABLE "payments" ADD COLUMN "settlement_batch_id" uuid NULL, ADD CONSTRAINT "payments_settlement_batches_payments" FOREIGN KEY ("settlement_batch_id") REFERENCES "settlement_batches" ("id") ON UPDATE NO ACTION ON DELETE SET NULL;
-- Create index "payment_settlement_batch_id" to table: "payments"
CREATE INDEX "payment_settlement_batch_id" ON "payments" ("settlement_batch_id");
-- Modify "refunds" table
ALTER TABLE "refunds" ADD COLUMN "after_payout" boolean NOT NULL DEFAULT false, ADD COLUMN "netted_batch_id" uuid NULL, ADD CONSTRAINT "refunds_settlement_batches_netted_refunds" FOREIGN KEY ("netted_batch_id") REFERENCES "settlement_batches" ("id") ON UPDATE NO ACTION ON DELETE SET NULL;
