-- Modify "card_requests" table
ALTER TABLE "card_requests" ADD COLUMN "deciders" jsonb NULL, ADD COLUMN "approved_by" jsonb NULL;
-- Modify "spend_approvals" table
ALTER TABLE "spend_approvals" ADD COLUMN "deciders" jsonb NULL, ADD COLUMN "approved_by" jsonb NULL;
-- Create "step_ups" table
CREATE TABLE "step_ups" ("id" uuid NOT NULL, "created_at" timestamptz NOT NULL, "updated_at" timestamptz NOT NULL, "user_id" uuid NOT NULL, "action" character varying NOT NULL, "subject" character varying NOT NULL DEFAULT '', "method" character varying NOT NULL, "session_data" bytea NULL, "token_hash" bytea NULL, "summary" character varying NOT NULL DEFAULT '', "expires_at" timestamptz NOT NULL, "confirmed_at" timestamptz NULL, "used_at" timestamptz NULL, PRIMARY KEY ("id"));
-- Create index "step_ups_token_hash_key" to table: "step_ups"
CREATE UNIQUE INDEX "step_ups_token_hash_key" ON "step_ups" ("token_hash");
-- Create index "stepup_expires_at" to table: "step_ups"
CREATE INDEX "stepup_expires_at" ON "step_ups" ("expires_at");
-- Create index "stepup_user_id_created_at" to table: "step_ups"
CREATE INDEX "stepup_user_id_created_at" ON "step_ups" ("user_id", "created_at");
