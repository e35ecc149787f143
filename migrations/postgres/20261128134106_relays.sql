-- Create "relays" table
CREATE TABLE "relays" ("id" uuid NOT NULL, "created_at" timestamptz NOT NULL, "updated_at" timestamptz NOT NULL, "livemode" boolean NOT NULL, "chain" character varying NOT NULL, "payer" character varying NOT NULL, "nonce" character varying NOT NULL, "value" bigint NOT NULL, "merchant_id" uuid NOT NULL, "session_id" uuid NOT NULL, "status" character varying NOT NULL DEFAULT 'pending', "tx_hash" character varying NULL, "in_flight_until" timestamptz NOT NULL, "finished_at" timestamptz NULL, PRIMARY KEY ("id"));
-- Create index "relay_livemode_chain_payer_nonce" to table: "relays"
CREATE INDEX "relay_livemode_chain_payer_nonce" ON "relays" ("livemode", "chain", "payer", "nonce");
-- Create index "relay_livemode_chain_payer_status" to table: "relays"
CREATE INDEX "relay_livemode_chain_payer_status" ON "relays" ("livemode", "chain", "payer", "status");
-- Create index "relay_livemode_payer_status_finished_at" to table: "relays"
CREATE INDEX "relay_livemode_payer_status_finished_at" ON "relays" ("livemode", "payer", "status", "finished_at");
