-- Create "spend_approvals" table
CREATE TABLE "spend_approvals" ("id" uuid NOT NULL, "created_at" timestamptz NOT NULL, "updated_at" timestamptz NOT NULL, "agent_id" uuid NOT NULL, "operation" character varying NOT NULL, "request" text NOT NULL, "amount" bigint NOT NULL, "recipient" character varying NOT NULL, "reason" character varying NOT NULL, "status" character varying NOT NULL DEFAULT 'awaiting_approval', "expires_at" timestamptz NOT NULL, "decided_at" timestamptz NULL, "decided_by" uuid NULL, "transfer_id" uuid NULL, "error" character varying NULL, "idempotency_key" character varying NULL, "fingerprint" bytea NULL, PRIMARY KEY ("id"));
-- Create index "spendapproval_agent_id_created_at" to table: "spend_approvals"
CREATE INDEX "spendapproval_agent_id_created_at" ON "spend_approvals" ("agent_id", "created_at");
-- Create index "spendapproval_agent_id_operation_idempotency_key" to table: "spend_approvals"
CREATE UNIQUE INDEX "spendapproval_agent_id_operation_idempotency_key" ON "spend_approvals" ("agent_id", "operation", "idempotency_key");
-- Create index "spendapproval_status_expires_at" to table: "spend_approvals"
CREATE INDEX "spendapproval_status_expires_at" ON "spend_approvals" ("status", "expires_at");
-- Create "spending_policies" table
CREATE TABLE "spending_policies" ("id" uuid NOT NULL, "created_at" timestamptz NOT NULL, "updated_at" timestamptz NOT NULL, "agent_id" uuid NOT NULL, "user_id" uuid NOT NULL, "approval_threshold" bigint NULL, "per_payment_cap" bigint NULL, "daily_cap" bigint NULL, "allowed_recipients" jsonb NULL, "deny_by_default" boolean NOT NULL DEFAULT false, PRIMARY KEY ("id"));
-- Create index "spendingpolicy_agent_id_user_id" to table: "spending_policies"
CREATE UNIQUE INDEX "spendingpolicy_agent_id_user_id" ON "spending_policies" ("agent_id", "user_id");
