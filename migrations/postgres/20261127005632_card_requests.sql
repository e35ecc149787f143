-- Create "card_requests" table
CREATE TABLE "card_requests" ("id" uuid NOT NULL, "created_at" timestamptz NOT NULL, "updated_at" timestamptz NOT NULL, "amount" bigint NOT NULL, "merchant_name" character varying NOT NULL, "description" character varying NOT NULL DEFAULT '', "status" character varying NOT NULL DEFAULT 'pending_approval', "expires_at" timestamptz NOT NULL, "decided_at" timestamptz NULL, "error" character varying NULL, "reserve_transfer_id" uuid NULL, "issuer" character varying NULL, "card_reference" character varying NULL, "card_token" character varying NULL, "card_last4" character varying NULL, "card_sealed" bytea NULL, "card_expires_at" timestamptz NULL, "card_revealed_at" timestamptz NULL, "charged_amount" bigint NULL, "charged_merchant" character varying NULL, "charged_at" timestamptz NULL, "refund_amount" bigint NOT NULL DEFAULT 0, "refund_chain" character varying NULL, "refund_to" character varying NULL, "refund_tx_hash" character varying NULL, "refund_sent_at" timestamptz NULL, "refunded_at" timestamptz NULL, "idempotency_key" character varying NULL, "fingerprint" bytea NULL, "agent_id" uuid NOT NULL, "user_id" uuid NOT NULL, PRIMARY KEY ("id"), CONSTRAINT "card_requests_agents_card_requests" FOREIGN KEY ("agent_id") REFERENCES "agents" ("id") ON UPDATE NO ACTION ON DELETE NO ACTION, CONSTRAINT "card_requests_users_card_requests" FOREIGN KEY ("user_id") REFERENCES "users" ("id") ON UPDATE NO ACTION ON DELETE NO ACTION);
-- Create index "cardrequest_agent_id_created_at" to table: "card_requests"
CREATE INDEX "cardrequest_agent_id_created_at" ON "card_requests" ("agent_id", "created_at");
-- Create index "cardrequest_agent_id_idempotency_key" to table: "card_requests"
CREATE UNIQUE INDEX "cardrequest_agent_id_idempotency_key" ON "card_requests" ("agent_id", "idempotency_key");
-- Create index "cardrequest_card_token" to table: "card_requests"
CREATE UNIQUE INDEX "cardrequest_card_token" ON "card_requests" ("card_token");
-- Create index "cardrequest_status_expires_at" to table: "card_requests"
CREATE INDEX "cardrequest_status_expires_at" ON "card_requests" ("status", "expires_at");
-- Create index "cardrequest_user_id_created_at" to table: "card_requests"
CREATE INDEX "cardrequest_user_id_created_at" ON "card_requests" ("user_id", "created_at");
