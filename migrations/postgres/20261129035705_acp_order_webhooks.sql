-- Modify "merchants" table
ALTER TABLE "merchants" ADD COLUMN "acp_webhook_url" character varying NULL, ADD COLUMN "acp_webhook_secret_encrypted" bytea NULL, ADD COLUMN "test_acp_webhook_url" character varying NULL, ADD COLUMN "test_acp_webhook_secret_encrypted" bytea NULL;
-- Create "acp_order_events" table
CREATE TABLE "acp_order_events" ("id" uuid NOT NULL, "created_at" timestamptz NOT NULL, "updated_at" timestamptz NOT NULL, "merchant_id" uuid NOT NULL, "session_id" uuid NOT NULL, "livemode" boolean NOT NULL, "seq" bigint NOT NULL, "event_type" character varying NOT NULL, "payload" bytea NOT NULL, "status" character varying NOT NULL DEFAULT 'pending', "attempts" bigint NOT NULL DEFAULT 0, "next_attempt_at" timestamptz NULL, "last_status_code" bigint NULL, "last_error" character varying NULL, "completed_at" timestamptz NULL, PRIMARY KEY ("id"));
-- Create index "acporderevent_merchant_id_livemode_created_at" to table: "acp_order_events"
CREATE INDEX "acporderevent_merchant_id_livemode_created_at" ON "acp_order_events" ("merchant_id", "livemode", "created_at");
-- Create index "acporderevent_session_id_seq" to table: "acp_order_events"
CREATE UNIQUE INDEX "acporderevent_session_id_seq" ON "acp_order_events" ("session_id", "seq");
