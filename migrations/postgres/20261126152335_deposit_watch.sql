-- Create index "checkoutsession_merchant_id_livemode_status_expires_at" to table: "checkout_sessions"
CREATE INDEX "checkoutsession_merchant_id_livemode_status_expires_at" ON "checkout_sessions" ("merchant_id", "livemode", "status", "expires_at");
-- Modify "deposit_addresses" table
ALTER TABLE "deposit_addresses" ADD COLUMN "session_ended_at" timestamptz NULL;
-- Create index "depositaddress_chain_session_ended_at" to table: "deposit_addresses"
CREATE INDEX "depositaddress_chain_session_ended_at" ON "deposit_addresses" ("chain", "session_ended_at");
