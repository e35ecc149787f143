-- Create "agents" table
CREATE TABLE "agents" ("id" uuid NOT NULL, "created_at" timestamptz NOT NULL, "updated_at" timestamptz NOT NULL, "username" character varying NOT NULL, "api_key_hash" bytea NOT NULL, "invite_code" character varying NOT NULL, "trust_score" bigint NOT NULL DEFAULT 0, "tier" character varying NOT NULL DEFAULT 'T0', "partner_verified" boolean NOT NULL DEFAULT false, "partner_provider" character varying NULL, "partner_subject" character varying NULL, "human_verified" boolean NOT NULL DEFAULT false, "external_wallet_verified" boolean NOT NULL DEFAULT false, "tx_count" bigint NOT NULL DEFAULT 0, "volume_sent" bigint NOT NULL DEFAULT 0, "volume_received" bigint NOT NULL DEFAULT 0, "fees_paid" bigint NOT NULL DEFAULT 0, "api_key_rotated_at" timestamptz NULL, "primary_wallet_id" uuid NULL, PRIMARY KEY ("id"));
-- Create index "agent_trust_score" to table: "agents"
CREATE INDEX "agent_trust_score" ON "agents" ("trust_score");
-- Create index "agent_tx_count" to table: "agents"
CREATE INDEX "agent_tx_count" ON "agents" ("tx_count");
-- Create index "agent_volume_sent" to table: "agents"
CREATE INDEX "agent_volume_sent" ON "agents" ("volume_sent");
-- Create index "agents_api_key_hash_key" to table: "agents"
CREATE UNIQUE INDEX "agents_api_key_hash_key" ON "agents" ("api_key_hash");
-- Create index "agents_invite_code_key" to table: "agents"
CREATE UNIQUE INDEX "agents_invite_code_key" ON "agents" ("invite_code");
-- Create index "agents_username_key" to table: "agents"
CREATE UNIQUE INDEX "agents_username_key" ON "agents" ("username");
-- Create "chain_cursors" table
CREATE TABLE "chain_cursors" ("id" uuid NOT NULL, "created_at" timestamptz NOT NULL, "updated_at" timestamptz NOT NULL, "chain" character varying NOT NULL, "mode" character varying NOT NULL, "next_block" bigint NOT NULL DEFAULT 0, "pending" jsonb NULL, PRIMARY KEY ("id"));
-- Create index "chaincursor_chain_mode" to table: "chain_cursors"
CREATE UNIQUE INDEX "chaincursor_chain_mode" ON "chain_cursors" ("chain", "mode");
-- Create "checkout_sessions" table
CREATE TABLE "checkout_sessions" ("id" uuid NOT NULL, "created_at" timestamptz NOT NULL, "updated_at" timestamptz NOT NULL, "external_id" character varying NOT NULL, "livemode" boolean NOT NULL, "amount_usd" numeric(20,6) NOT NULL, "currency" character varying NOT NULL DEFAULT 'USD', "description" character varying NULL, "success_url" character varying NULL, "cancel_url" character varying NULL, "metadata" jsonb NULL, "idempotency_key" character varying NULL, "status" character varying NOT NULL DEFAULT 'pending', "chain" character varying NULL, "token" character varying NULL, "expires_at" timestamptz NOT NULL, "confirmed_at" timestamptz NULL, "cancelled_at" timestamptz NULL, "expired_at" timestamptz NULL, "merchant_id" uuid NOT NULL, PRIMARY KEY ("id"));
-- Create index "checkout_sessions_external_id_key" to table: "checkout_sessions"
CREATE UNIQUE INDEX "checkout_sessions_external_id_key" ON "checkout_sessions" ("external_id");
-- Create index "checkoutsession_merchant_id_livemode_created_at" to table: "checkout_sessions"
CREATE INDEX "checkoutsession_merchant_id_livemode_created_at" ON "checkout_sessions" ("merchant_id", "livemode", "created_at");
-- Create index "checkoutsession_merchant_id_livemode_idempotency_key" to table: "checkout_sessions"
CREATE UNIQUE INDEX "checkoutsession_merchant_id_livemode_idempotency_key" ON "checkout_sessions" ("merchant_id", "livemode", "idempotency_key");
-- Create index "checkoutsession_status_expires_at" to table: "checkout_sessions"
CREATE INDEX "checkoutsession_status_expires_at" ON "checkout_sessions" ("status", "expires_at");
-- Create "deposit_addresses" table
CREATE TABLE "deposit_addresses" ("id" uuid NOT NULL, "created_at" timestamptz NOT NULL, "updated_at" timestamptz NOT NULL, "chain" character varying NOT NULL, "chain_family" character varying NOT NULL, "address" character varying NOT NULL, "derivation_index" bigint NOT NULL, "swept" boolean NOT NULL DEFAULT false, "sweep_tx_hash" character varying NULL, "session_id" uuid NOT NULL, PRIMARY KEY ("id"));
-- Create index "depositaddress_chain_address" to table: "deposit_addresses"
CREATE UNIQUE INDEX "depositaddress_chain_address" ON "deposit_addresses" ("chain", "address");
-- Create index "depositaddress_chain_family_derivation_index" to table: "deposit_addresses"
CREATE UNIQUE INDEX "depositaddress_chain_family_derivation_index" ON "deposit_addresses" ("chain_family", "derivation_index");
-- Create index "depositaddress_session_id" to table: "deposit_addresses"
CREATE INDEX "depositaddress_session_id" ON "deposit_addresses" ("session_id");
-- Create "merchants" table
CREATE TABLE "merchants" ("id" uuid NOT NULL, "created_at" timestamptz NOT NULL, "updated_at" timestamptz NOT NULL, "name" character varying NOT NULL, "email" character varying NOT NULL, "website" character varying NULL, "webhook_url" character varying NULL, "success_url" character varying NULL, "cancel_url" character varying NULL, "settlement_type" character varying NOT NULL DEFAULT 'crypto_usdc', "settlement_address" character varying NULL, "settlement_chain" character varying NULL, "accepted_tokens" jsonb NULL, "brand_color" character varying NULL, "webhook_secret_encrypted" bytea NOT NULL, "active" boolean NOT NULL DEFAULT true, "deactivated_at" timestamptz NULL, PRIMARY KEY ("id"));
-- Create "merchant_keys" table
CREATE TABLE "merchant_keys" ("id" uuid NOT NULL, "created_at" timestamptz NOT NULL, "updated_at" timestamptz NOT NULL, "kind" character varying NOT NULL, "public_key" character varying NOT NULL, "secret_key_hash" bytea NOT NULL, "revoked_at" timestamptz NULL, "merchant_id" uuid NOT NULL, PRIMARY KEY ("id"));
-- Create index "merchant_keys_public_key_key" to table: "merchant_keys"
CREATE UNIQUE INDEX "merchant_keys_public_key_key" ON "merchant_keys" ("public_key");
-- Create index "merchant_keys_secret_key_hash_key" to table: "merchant_keys"
CREATE UNIQUE INDEX "merchant_keys_secret_key_hash_key" ON "merchant_keys" ("secret_key_hash");
-- Create index "merchantkey_merchant_id_kind_revoked_at" to table: "merchant_keys"
CREATE INDEX "merchantkey_merchant_id_kind_revoked_at" ON "merchant_keys" ("merchant_id", "kind", "revoked_at");
-- Create "payments" table
CREATE TABLE "payments" ("id" uuid NOT NULL, "created_at" timestamptz NOT NULL, "updated_at" timestamptz NOT NULL, "external_id" character varying NOT NULL, "chain" character varying NOT NULL, "token" character varying NOT NULL DEFAULT 'USDC', "tx_hash" character varying NOT NULL, "log_index" bigint NOT NULL, "from_address" character varying NOT NULL, "to_address" character varying NOT NULL, "amount_token" bigint NOT NULL, "amount_usd" numeric(20,6) NOT NULL, "block_number" bigint NOT NULL, "block_hash" character varying NULL, "confirmations" bigint NOT NULL DEFAULT 0, "status" character varying NOT NULL DEFAULT 'detected', "late" boolean NOT NULL DEFAULT false, "confirmed_at" timestamptz NULL, "settlement_status" character varying NULL, "settlement_tx_hash" character varying NULL, "settlement_reference" character varying NULL, "settlement_fee" bigint NULL, "settlement_net" bigint NULL, "settlement_fx_rate" character varying NULL, "settled_at" timestamptz NULL, "sweep_tx_hash" character varying NULL, "session_id" uuid NOT NULL, "deposit_address_id" uuid NULL, PRIMARY KEY ("id"));
-- Create index "payment_chain_tx_hash_log_index" to table: "payments"
CREATE UNIQUE INDEX "payment_chain_tx_hash_log_index" ON "payments" ("chain", "tx_hash", "log_index");
-- Create index "payment_session_id" to table: "payments"
CREATE INDEX "payment_session_id" ON "payments" ("session_id");
-- Create index "payment_settlement_status" to table: "payments"
CREATE INDEX "payment_settlement_status" ON "payments" ("settlement_status");
-- Create index "payment_status_chain" to table: "payments"
CREATE INDEX "payment_status_chain" ON "payments" ("status", "chain");
-- Create index "payments_external_id_key" to table: "payments"
CREATE UNIQUE INDEX "payments_external_id_key" ON "payments" ("external_id");
-- Create "transfers" table
CREATE TABLE "transfers" ("id" uuid NOT NULL, "created_at" timestamptz NOT NULL, "updated_at" timestamptz NOT NULL, "chain" character varying NOT NULL, "token" character varying NOT NULL DEFAULT 'USDC', "from_address" character varying NOT NULL, "to_address" character varying NOT NULL, "amount" bigint NOT NULL, "fee" bigint NOT NULL DEFAULT 0, "net" bigint NOT NULL, "tx_hash" character varying NULL, "status" character varying NOT NULL DEFAULT 'pending', "ref" bytea NOT NULL, "memo" character varying NULL, "error" character varying NULL, "submitted_at" timestamptz NULL, "completed_at" timestamptz NULL, "from_agent_id" uuid NOT NULL, "to_agent_id" uuid NULL, PRIMARY KEY ("id"));
-- Create index "transfer_chain_tx_hash" to table: "transfers"
CREATE INDEX "transfer_chain_tx_hash" ON "transfers" ("chain", "tx_hash");
-- Create index "transfer_from_agent_id_created_at" to table: "transfers"
CREATE INDEX "transfer_from_agent_id_created_at" ON "transfers" ("from_agent_id", "created_at");
-- Create index "transfer_status_from_agent_id" to table: "transfers"
CREATE INDEX "transfer_status_from_agent_id" ON "transfers" ("status", "from_agent_id");
-- Create index "transfer_to_agent_id_created_at" to table: "transfers"
CREATE INDEX "transfer_to_agent_id_created_at" ON "transfers" ("to_agent_id", "created_at");
-- Create index "transfers_ref_key" to table: "transfers"
CREATE UNIQUE INDEX "transfers_ref_key" ON "transfers" ("ref");
-- Create "wallets" table
CREATE TABLE "wallets" ("id" uuid NOT NULL, "created_at" timestamptz NOT NULL, "updated_at" timestamptz NOT NULL, "chain" character varying NOT NULL, "address" character varying NOT NULL, "encrypted_key" bytea NULL, "kind" character varying NOT NULL DEFAULT 'custodial', "verified" boolean NOT NULL DEFAULT false, "agent_id" uuid NOT NULL, PRIMARY KEY ("id"));
-- Create index "wallet_agent_id_chain" to table: "wallets"
CREATE INDEX "wallet_agent_id_chain" ON "wallets" ("agent_id", "chain");
-- Create index "wallet_chain_address" to table: "wallets"
CREATE UNIQUE INDEX "wallet_chain_address" ON "wallets" ("chain", "address");
-- Create "webhook_attempts" table
CREATE TABLE "webhook_attempts" ("id" uuid NOT NULL, "created_at" timestamptz NOT NULL, "updated_at" timestamptz NOT NULL, "status_code" bigint NOT NULL DEFAULT 0, "duration_ms" bigint NOT NULL, "error" character varying NULL, "at" timestamptz NOT NULL, "delivery_id" uuid NOT NULL, PRIMARY KEY ("id"));
-- Create index "webhookattempt_delivery_id_at" to table: "webhook_attempts"
CREATE INDEX "webhookattempt_delivery_id_at" ON "webhook_attempts" ("delivery_id", "at");
-- Create "webhook_deliveries" table
CREATE TABLE "webhook_deliveries" ("id" uuid NOT NULL, "created_at" timestamptz NOT NULL, "updated_at" timestamptz NOT NULL, "url" character varying NOT NULL, "status" character varying NOT NULL DEFAULT 'pending', "attempts" bigint NOT NULL DEFAULT 0, "next_attempt_at" timestamptz NULL, "last_attempt_at" timestamptz NULL, "completed_at" timestamptz NULL, "event_id" uuid NOT NULL, PRIMARY KEY ("id"));
-- Create index "webhookdelivery_event_id" to table: "webhook_deliveries"
CREATE INDEX "webhookdelivery_event_id" ON "webhook_deliveries" ("event_id");
-- Create index "webhookdelivery_status_next_attempt_at" to table: "webhook_deliveries"
CREATE INDEX "webhookdelivery_status_next_attempt_at" ON "webhook_deliveries" ("status", "next_attempt_at");
-- Create "webhook_events" table
CREATE TABLE "webhook_events" ("id" uuid NOT NULL, "created_at" timestamptz NOT NULL, "updated_at" timestamptz NOT NULL, "event_type" character varying NOT NULL, "payload" bytea NOT NULL, "livemode" boolean NOT NULL, "session_id" uuid NULL, "merchant_id" uuid NOT NULL, PRIMARY KEY ("id"));
-- Create index "webhookevent_merchant_id_livemode_created_at" to table: "webhook_events"
CREATE INDEX "webhookevent_merchant_id_livemode_created_at" ON "webhook_events" ("merchant_id", "livemode", "created_at");
-- Create index "webhookevent_session_id" to table: "webhook_events"
CREATE INDEX "webhookevent_session_id" ON "webhook_events" ("session_id");
-- Modify "agents" table
ALTER TABLE "agents" ADD CONSTRAINT "agents_wallets_primary_wallet" FOREIGN KEY ("primary_wallet_id") REFERENCES "wallets" ("id") ON UPDATE NO ACTION ON DELETE SET NULL;
-- Modify "checkout_sessions" table
ALTER TABLE "checkout_sessions" ADD CONSTRAINT "checkout_sessions_merchants_sessions" FOREIGN KEY ("merchant_id") REFERENCES "merchants" ("id") ON UPDATE NO ACTION ON DELETE NO ACTION;
-- Modify "deposit_addresses" table
ALTER TABLE "deposit_addresses" ADD CONSTRAINT "deposit_addresses_checkout_sessions_deposit_addresses" FOREIGN KEY ("session_id") REFERENCES "checkout_sessions" ("id") ON UPDATE NO ACTION ON DELETE NO ACTION;
-- Modify "merchant_keys" table
ALTER TABLE "merchant_keys" ADD CONSTRAINT "merchant_keys_merchants_keys" FOREIGN KEY ("merchant_id") REFERENCES "merchants" ("id") ON UPDATE NO ACTION ON DELETE NO ACTION;
-- Modify "payments" table
ALTER TABLE "payments" ADD CONSTRAINT "payments_checkout_sessions_payments" FOREIGN KEY ("session_id") REFERENCES "checkout_sessions" ("id") ON UPDATE NO ACTION ON DELETE NO ACTION, ADD CONSTRAINT "payments_deposit_addresses_payments" FOREIGN KEY ("deposit_address_id") REFERENCES "deposit_addresses" ("id") ON UPDATE NO ACTION ON DELETE SET NULL;
-- Modify "transfers" table
ALTER TABLE "transfers" ADD CONSTRAINT "transfers_agents_received_transfers" FOREIGN KEY ("to_agent_id") REFERENCES "agents" ("id") ON UPDATE NO ACTION ON DELETE SET NULL, ADD CONSTRAINT "transfers_agents_sent_transfers" FOREIGN KEY ("from_agent_id") REFERENCES "agents" ("id") ON UPDATE NO ACTION ON DELETE NO ACTION;
-- Modify "wallets" table
ALTER TABLE "wallets" ADD CONSTRAINT "wallets_agents_wallets" FOREIGN KEY ("agent_id") REFERENCES "agents" ("id") ON UPDATE NO ACTION ON DELETE NO ACTION;
-- Modify "webhook_attempts" table
ALTER TABLE "webhook_attempts" ADD CONSTRAINT "webhook_attempts_webhook_deliveries_attempt_log" FOREIGN KEY ("delivery_id") REFERENCES "webhook_deliveries" ("id") ON UPDATE NO ACTION ON DELETE NO ACTION;
-- Modify "webhook_deliveries" table
ALTER TABLE "webhook_deliveries" ADD CONSTRAINT "webhook_deliveries_webhook_events_deliveries" FOREIGN KEY ("event_id") REFERENCES "webhook_events" ("id") ON UPDATE NO ACTION ON DELETE NO ACTION;
-- Modify "webhook_events" table
ALTER TABLE "webhook_events" ADD CONSTRAINT "webhook_events_checkout_sessions_webhook_events" FOREIGN KEY ("session_id") REFERENCES "checkout_sessions" ("id") ON UPDATE NO ACTION ON DELETE SET NULL, ADD CONSTRAINT "webhook_events_merchants_webhook_events" FOREIGN KEY ("merchant_id") REFERENCES "merchants" ("id") ON UPDATE NO ACTION ON DELETE NO ACTION;
