-- Modify "payments" table
ALTER TABLE "payments" ADD COLUMN "refunded_token" bigint NOT NULL DEFAULT 0;
-- Create "refunds" table
CREATE TABLE "refunds" ("id" uuid NOT NULL, "created_at" timestamptz NOT NULL, "updated_at" timestamptz NOT NULL, "external_id" character varying NOT NULL, "session_id" uuid NOT NULL, "merchant_id" uuid NOT NULL, "livemode" boolean NOT NULL, "chain" character varying NOT NULL, "token" character varying NOT NULL DEFAULT 'USDC', "amount_token" bigint NOT NULL, "amount_usd" numeric(20,6) NOT NULL, "to_address" character varying NOT NULL, "reason" character varying NULL, "status" character varying NOT NULL DEFAULT 'pending', "tx_hash" character varying NULL, "error" character varying NULL, "reverts" bigint NOT NULL DEFAULT 0, "completed_at" timestamptz NULL, "idempotency_key" character varying NULL, "request_hash" character varying NULL, "payment_id" uuid NOT NULL, PRIMARY KEY ("id"), CONSTRAINT "refunds_payments_refunds" FOREIGN KEY ("payment_id") REFERENCES "payments" ("id") ON UPDATE NO ACTION ON DELETE NO ACTION);
-- Create index "refund_merchant_id_livemode_idempotency_key" to table: "refunds"
CREATE UNIQUE INDEX "refund_merchant_id_livemode_idempotency_key" ON "refunds" ("merchant_id", "livemode", "idempotency_key");
-- Create index "refund_session_id" to table: "refunds"
CREATE INDEX "refund_session_id" ON "refunds" ("session_id");
-- Create index "refund_status" to table: "refunds"
CREATE INDEX "refund_status" ON "refunds" ("status");
-- Create index "refunds_external_id_key" to table: "refunds"
CREATE UNIQUE INDEX "refunds_external_id_key" ON "refunds" ("external_id");
